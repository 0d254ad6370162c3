"""A run as the store keeps it: read from a run folder, a results.csv or an nccl-tests log/JSON.

One value per series per run: the median busbw of the run's usable rows of that series (several
when the run had --cycles or --split groups), so a long run weighs no more than a short one, and
the run's own noise for that series (`within_run_noise`): what the rule knows of the series' spread
before it has many runs.
A run's id is a hash of its meta.json and its rows, so adding the same run twice stores it once,
while a copy with edited rows is a run of its own.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_bench.errors import UserInputError
from nccl_bench.history.store_schema import series_id
from nccl_bench.ranks.split import hosts_of_group
from nccl_bench.results.run_folder import DOCTOR_JSON, META_JSON, RESULTS_CSV, read_meta
from nccl_bench.results.schema import STATUS_OK, STATUS_UNSUPPORTED, ResultRow, row_to_record
from nccl_bench.results.whole_file import read_json_or_none
from nccl_bench.units import hostlist
from nccl_bench.units.stats import median

UNKNOWN = "unknown"
COMPLETE = "complete"
SWEEP, DOCTOR, REPLAY, IMPORTED = "sweep", "doctor", "replay", "import"


@dataclass(frozen=True)
class SeriesValue:
    key: tuple  # SERIES_COLUMNS' values
    busbw_gbps: float
    time_us: float | None
    noise: float | None = None  # within_run_noise of its rows (the median); None: the rows do not say

    @property
    def series(self) -> str:
        return series_id(self.key)


@dataclass(frozen=True)
class HostRecord:
    """A host of a doctor run, and the kinds of suspect it was (none: it passed)."""

    host: str
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class HostRows:
    """A host of a run's measured rows: how many it took part in, and how late it arrived in each that
    named it the late host (late_us; None where the row did not say by how much)."""

    host: str
    rows: int
    late_us: tuple[float | None, ...]


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    kind: str  # SWEEP, DOCTOR, REPLAY or IMPORTED (no meta.json: a bare CSV, an nccl-tests log)
    status: str  # meta.json's status; only complete runs are judged
    started_utc: str
    source: str  # the path it was read from
    system: str
    backend: str
    world_size: int | None
    nodes: int | None
    verdict: str  # the doctor's verdict, or "" for a sweep
    meta: dict[str, Any]
    values: tuple[SeriesValue, ...]
    hosts: tuple[HostRecord, ...]
    row_hosts: tuple[HostRows, ...] = ()  # who took part in the rows and who was late: none without meta.json's hosts

    @property
    def usable(self) -> bool:
        return self.status == COMPLETE


def system_of(meta: dict[str, Any] | None) -> str:
    """GPU model x count per node, or the CPU's host(s) for a run on CPUs; runs of two systems never mix."""
    if not meta:
        return UNKNOWN
    devices = [str(d) for d in meta.get("devices") or []]
    hosts = sorted(set(str(h) for h in meta.get("hostnames") or []))
    if not devices:
        return UNKNOWN
    if all(d.startswith("cpu") for d in devices):
        return f"cpu@{hostlist.compress(hosts)}" if hosts else devices[0]
    model = max(set(devices), key=devices.count)
    per_node = len(devices) // max(1, int(meta.get("nodes") or len(hosts) or 1))
    return f"{model} x{per_node}"


def read_record(path: Path, option: str, started_fallback: str) -> RunRecord:
    """The run at `path` (a run folder, or any file load_rows reads); refused in one line naming `option`."""
    path = Path(path)
    if path.is_file() and path.name == RESULTS_CSV and (path.parent / META_JSON).is_file():
        path = path.parent  # a run folder's own CSV is its run
    meta = read_meta(path) if path.is_dir() else None
    doctor = read_json_or_none(path / DOCTOR_JSON) if path.is_dir() else None
    if isinstance(doctor, dict):
        return _doctor_record(path, meta or {}, doctor, started_fallback)
    from nccl_bench.results.loader import load_rows

    rows = load_rows(path, option)
    return _sweep_record(path, meta, rows, started_fallback)


def _sweep_record(path: Path, meta: dict[str, Any] | None, rows: list[ResultRow], started: str) -> RunRecord:
    system = system_of(meta)
    first = rows[0]
    return RunRecord(
        run_id=_run_id(meta, [row_to_record(row) for row in rows]), kind=_kind(meta),
        status=str(meta.get("status", UNKNOWN)) if meta else COMPLETE,
        started_utc=str(meta.get("started_utc") or started) if meta else started, source=str(path),
        system=system, backend=first.backend, world_size=first.world_size, nodes=first.nodes, verdict="",
        meta=meta or {}, values=tuple(series_values(rows, system)), hosts=(),
        row_hosts=host_rows(rows, [str(h) for h in (meta or {}).get("hostnames") or []]),
    )


def host_rows(rows: list[ResultRow], hostnames: list[str]) -> tuple[HostRows, ...]:
    """Per host of the ranks (`hostnames`, index = rank), the measured rows it took part in (a --split
    group's row: its group's hosts) and the lateness of each row that named it late. A host is late in a row
    when every sample had it arrive after the others (units/arrivals.late_rank): a host late row after row
    and run after run holds its collectives back."""
    taken: dict[str, int] = defaultdict(int)
    late: dict[str, list[float | None]] = defaultdict(list)
    for row in rows:
        if row.status == STATUS_UNSUPPORTED:
            continue
        for host in hosts_of_group(row.group, hostnames) if row.group else dict.fromkeys(hostnames):
            taken[host] += 1
        if row.late_host:
            late[row.late_host].append(row.late_us)
    return tuple(HostRows(host, taken.get(host, 0), tuple(late.get(host, ()))) for host in sorted({*taken, *late}))


def _kind(meta: dict[str, Any] | None) -> str:
    """A run folder's kind is the command that made it (meta.json's `command`); a file without one is imported."""
    if not meta:
        return IMPORTED
    return REPLAY if meta.get("command") == "replay" else SWEEP


def series_values(rows: list[ResultRow], system: str) -> list[SeriesValue]:
    """One value per series: the median over the run's ok rows with a busbw. A row whose rank count its
    nccl-tests log does not say joins no series (it cannot be told comparable with any), nor does a row
    replayed from a job's trace (`source`): it is judged against the job, not against the fabric's series."""
    grouped: dict[tuple, list[ResultRow]] = defaultdict(list)
    for row in rows:
        if row.status == STATUS_OK and row.busbw_gbps is not None and row.world_size is not None and not row.source:
            key = (row.op, row.placement, row.size_bytes, row.dtype, row.world_size, row.nodes, row.backend, system,
                   row.variant)
            grouped[key].append(row)
    values = []
    for key, group in grouped.items():
        times = [row.time_us for row in group if row.time_us is not None]
        noises = [n for n in map(within_run_noise, group) if n is not None]
        values.append(SeriesValue(key, median([row.busbw_gbps for row in group]), median(times) if times else None,
                                  median(noises) if noises else None))
    return values


# The expected range of n normal samples in standard deviations (d2, the control-chart constant;
# ASTM E2587 table): a range of trials divided by d2(n) estimates one trial's standard deviation.
RANGE_TO_SIGMA = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078,
                  15: 3.472, 20: 3.735, 25: 3.931}
P95_Z = 1.645  # the 95th percentile of a normal sample, in standard deviations above its median


def within_run_noise(row: ResultRow) -> float | None:
    """The uncertainty of the row's own figure in log space, from its samples. With --trials >= 2: one
    trial's spread, ln(slowest / fastest trial mean) / d2(trials), over the root of the trials (the
    figure is their median: sqrt(pi / 2) / sqrt(n) of one trial's sigma). With one trial: the single-op
    spread ln(p95 / p50) / 1.645 over the root of the ops the mean averages, a lower bound (ops in a row
    are not independent). Single ops vary far more than a mean of hundreds of them, so their spread
    itself would hide any drop (the rule's band would allow everything)."""
    if row.trials >= 2 and row.time_min_us and row.time_max_us and row.time_min_us > 0:
        known = max(n for n in RANGE_TO_SIGMA if n <= row.trials)
        one_trial = math.log(row.time_max_us / row.time_min_us) / RANGE_TO_SIGMA[known]
        return one_trial * math.sqrt(math.pi / 2 / row.trials)
    if row.p50_us and row.p95_us and row.p50_us > 0 and row.p95_us >= row.p50_us:
        return math.log(row.p95_us / row.p50_us) / P95_Z / math.sqrt(max(1, row.iters))
    return None


def _doctor_record(path: Path, meta: dict[str, Any], doctor: dict[str, Any], started: str) -> RunRecord:
    kinds: dict[str, set[str]] = defaultdict(set)
    for node in doctor.get("nodes") or []:
        kinds[str(node.get("host"))]
    for suspect in doctor.get("suspects") or []:
        for host in suspect.get("hosts") or []:
            kinds[str(host)].add(str(suspect.get("kind")))
    if not kinds:
        raise UserInputError(str(path), "its doctor.json names no host")
    return RunRecord(
        run_id=_run_id(meta, doctor), kind=DOCTOR, status=str(meta.get("status", UNKNOWN)),
        started_utc=str(meta.get("started_utc") or started), source=str(path), system=system_of(meta),
        backend=str(meta.get("backend", UNKNOWN)), world_size=meta.get("world_size"), nodes=meta.get("nodes"),
        verdict=str(doctor.get("verdict", "")), meta=meta, values=(),
        hosts=tuple(HostRecord(host, tuple(sorted(k))) for host, k in sorted(kinds.items())),
    )


def _run_id(meta: dict[str, Any] | None, content: Any) -> str:
    """The same meta.json and the same results: the same run, wherever the folder was copied."""
    text = json.dumps([meta or {}, content], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]

