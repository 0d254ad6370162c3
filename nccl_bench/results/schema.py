"""Result rows and the on-disk column contract: names, units, types, the schema version.

Every CSV row carries `schema_version`, so a bare CSV handed to `compare` or `report` can be
recognised without its meta.json. Units live in the column names (`time_us`, `busbw_gbps`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_bench.units import nccl_env

# The placement column holds one of these: where a collective's output goes is part of its spec.
from nccl_bench.units.op_table import PLACEMENT_IN as PLACEMENT_IN
from nccl_bench.units.op_table import PLACEMENT_OUT as PLACEMENT_OUT

SCHEMA_VERSION = 6
# Columns each version added; a file of an older version lacks them and reads them as empty (None, "").
COLUMNS_ADDED: dict[int, tuple[str, ...]] = {2: ("p95_us", "cycle", "group"), 3: ("variant", "algo", "proto"),
                                             4: ("source",),
                                             5: ("late_rank", "late_host", "late_us", "i_p99_us", "i_cv_pct"),
                                             6: ("launch_path_us",)}
# Columns renamed, with the version that renamed them and their earlier name, read from older files.
# slowest_rank named the rank with the most time in the op, which under a late arriver is a rank that
# waited for it: a victim read as a culprit. The same number is now max_time_rank; late_rank names the culprit.
RENAMED: dict[str, tuple[int, str]] = {"max_time_rank": (5, "slowest_rank")}
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)

STATUS_OK = "ok"
STATUS_WRONG = "wrong"
STATUS_UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class ResultRow:
    """One measured point. Times are per operation; a value that does not exist is None."""

    op: str
    placement: str
    size_bytes: int
    count: int
    dtype: str
    redop: str  # "none" for ops without a reduction, as nccl-tests prints
    root: int  # -1 for rootless ops, as nccl-tests prints
    world_size: int | None  # None: an nccl-tests log that does not say, where no number depends on it
    nodes: int
    backend: str
    iters: int  # timed operations per trial
    trials: int
    time_us: float | None  # mean per op (nccl-tests convention); median over trials
    time_min_us: float | None  # fastest trial's mean per op
    time_max_us: float | None  # slowest trial's mean per op
    p50_us: float | None  # median single-op latency over all timed ops
    p99_us: float | None
    algbw_gbps: float | None  # size_bytes / time_us, 1e9 bytes/s
    busbw_gbps: float | None  # algbw_gbps * busbw_factor
    busbw_factor: float | None
    wrong: int | None  # elements that failed the check, summed over ranks; None = not checked
    # the rank with the most time inside the op over the trials (it defines the row under agg=max): under a
    # late arriver, a rank that waited for it, not the cause (late_rank names that)
    max_time_rank: int | None
    agg: str  # how per-rank times were combined: max, avg or min
    peak_gbps: float | None = None  # reference peak bus bandwidth (see limits)
    pct_of_peak: float | None = None  # 100 * busbw_gbps / peak_gbps
    status: str = STATUS_OK  # ok | wrong | unsupported
    flags: str = ""  # ';'-separated warnings: noisy, below_timer_resolution, ...
    p95_us: float | None = None  # 95th percentile single-op latency over all timed ops
    cycle: int | None = None  # which pass of a --cycles run (1, 2, ...); None: a run of one pass
    group: str = ""  # the --split sub-group that measured the row; "": the whole world
    variant: str = ""  # the --nccl-env settings its ranks ran with ("NCCL_ALGO=Ring NCCL_PROTO=LL"); "": none
    algo: str = ""  # --nccl-trace: the algorithm NCCL chose (RING, TREE, NVLS, ...); "": not traced or not said
    proto: str = ""  # --nccl-trace: the protocol NCCL chose (LL, LL128, SIMPLE)
    source: str = ""  # where the point came from: "trace:FILE" for a replayed job's collective; "": a sweep's plan
    late_rank: int | None = None  # the rank that arrived late in every sample (units/arrivals.late_rank)
    late_host: str = ""  # its host
    late_us: float | None = None  # by how much it arrived after the others' median, microseconds per op
    i_p99_us: float | None = None  # nccl-tests -I's i_p99: nearest-rank 99th percentile of per-op times
    i_cv_pct: float | None = None  # nccl-tests -I's cv%: population stdev / mean of per-op times, x 100
    # a replay with --cuda-graph: the same point timed call by call through torch's launch path, beside time_us
    # (kernel time); None otherwise
    launch_path_us: float | None = None
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class RunRows:
    """One input's rows, with its path and the argument or option that named it (for messages)."""

    path: Path
    option: str
    rows: tuple[ResultRow, ...]

    @property
    def label(self) -> str:
        return f"{self.option} {self.path}"


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ResultRow))
KEY_COLUMNS = ("op", "size_bytes", "dtype", "redop", "placement", "world_size", "variant")
_INT_COLUMNS = {"size_bytes", "count", "root", "nodes", "iters", "trials", "schema_version"}
_OPTIONAL_INT_COLUMNS = {"wrong", "max_time_rank", "cycle", "world_size", "late_rank"}
_FLOAT_COLUMNS = {
    "time_us", "time_min_us", "time_max_us", "p50_us", "p95_us", "p99_us", "algbw_gbps", "busbw_gbps",
    "busbw_factor", "peak_gbps", "pct_of_peak", "late_us", "i_p99_us", "i_cv_pct", "launch_path_us",
}


def required_columns(version: int) -> tuple[str, ...]:
    """The columns a file of results format `version` must have: those added later may be absent."""
    later = {name for added_in, names in COLUMNS_ADDED.items() if added_in > version for name in names}
    return tuple(_name_in(name, version) for name in COLUMNS if name not in later)


def _name_in(name: str, version: int) -> str:
    """A column's name in files of `version` (its earlier name before a rename)."""
    renamed_in, earlier = RENAMED.get(name, (0, name))
    return earlier if version < renamed_in else name


def unreadable_version(version: Any) -> str | None:
    """Why a results format version cannot be read, or None when it can."""
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = None
    if number in READABLE_VERSIONS and str(number) == str(version).strip():
        return None
    if number is not None and number > SCHEMA_VERSION:
        hint = "written by a newer nccl_bench; upgrade to read it"
    elif number is not None and number < min(READABLE_VERSIONS):
        hint = "written by an older nccl_bench"
    else:
        hint = "not a version nccl_bench wrote"
    readable = ", ".join(str(v) for v in READABLE_VERSIONS[:-1]) + f" and {READABLE_VERSIONS[-1]}"
    return f"results format version {version}; this nccl_bench reads versions {readable} ({hint})"


def row_to_record(row: ResultRow) -> dict[str, Any]:
    return dataclasses.asdict(row)


def csv_cells(row: ResultRow) -> list[Any]:
    """One results.csv line in COLUMNS order: None is an empty cell, floats keep every digit (repr)."""
    return ["" if value is None else value for value in row_to_record(row).values()]


def record_to_row(record: dict[str, Any]) -> ResultRow:
    """Inverse of row_to_record for values read back from CSV/JSON (strings, NaN or None), checked by check_row.

    A row of an older version comes back in the current one, its missing columns empty.
    """
    values: dict[str, Any] = {}
    for name in COLUMNS:
        raw = record[name] if name in record else record.get(RENAMED.get(name, (0, name))[1])
        values[name] = _coerce(name, raw)
    values["schema_version"] = SCHEMA_VERSION
    row = ResultRow(**values)
    check_row(row)
    return row


# Names read from files are identifiers (what nccl_bench and nccl-tests write, unknown nccl-tests names
# included): nothing Markdown, HTML, a terminal or a spreadsheet would read as markup, an escape
# sequence or a formula. `flags` is free text (an unsupported row's reason, which may span lines) kept to
# printable characters and newlines, not beginning as a spreadsheet formula does.
NAME_COLUMNS = ("op", "placement", "dtype", "redop", "backend", "agg", "status", "algo", "proto")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_SETTING = f"{nccl_env.NAME.pattern}={nccl_env.VALUE.pattern}"  # what --nccl-env accepts, nothing more
_VARIANT = re.compile(f"{_SETTING}( {_SETTING})*")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# The smallest value each whole-number column can hold; measured values are never negative.
_INT_MINIMUM = {
    "size_bytes": 0, "count": 0, "root": -1, "world_size": 1, "nodes": 1, "iters": 0, "trials": 0,
    "schema_version": 0, "wrong": 0, "max_time_rank": 0, "cycle": 0, "late_rank": 0,
}


def check_row(row: ResultRow) -> None:
    """A row read from a file holds only what nccl_bench could have written; ValueError names the column."""
    for name in NAME_COLUMNS:
        value = getattr(row, name)
        if value and not _NAME.fullmatch(value):
            raise ValueError(f"{name}: {value!r} is not a name (letters, digits, '_', '.', '-')")
    for name in ("group", "source", "late_host"):
        value = getattr(row, name)
        if value and (not value.isprintable() or value.startswith(FORMULA_STARTS)):
            raise ValueError(f"{name}: {value!r} holds a control character or begins like a spreadsheet formula")
    if row.variant and not _VARIANT.fullmatch(row.variant):
        raise ValueError(f"variant: {row.variant!r} is not NCCL_NAME=value pairs separated by spaces")
    if not row.flags.replace("\n", "").isprintable() or row.flags.startswith(FORMULA_STARTS):
        raise ValueError(f"flags: {row.flags!r} holds a control character or begins like a spreadsheet formula")
    for name, minimum in _INT_MINIMUM.items():
        value = getattr(row, name)
        if value is not None and value < minimum:
            raise ValueError(f"{name}: must be at least {minimum}, got {value}")
    for name in _FLOAT_COLUMNS:
        value = getattr(row, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}: expected a finite number of at least 0, got {value!r}")


def _is_missing(raw: Any) -> bool:
    return raw is None or raw == "" or (isinstance(raw, float) and raw != raw)


def _whole(name: str, raw: Any) -> int:
    try:
        number = float(raw)
        if not number.is_integer():
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: expected a whole number, got {raw!r}") from None
    return int(number)


def _coerce(name: str, raw: Any) -> Any:
    if name in _INT_COLUMNS:
        return _whole(name, raw)
    if name in _OPTIONAL_INT_COLUMNS:
        return None if _is_missing(raw) else _whole(name, raw)
    if name in _FLOAT_COLUMNS:
        if _is_missing(raw):
            return None
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a number, got {raw!r}") from None
    return "" if _is_missing(raw) else str(raw)


# ranks.csv: every rank's time inside the op and arrival offset, per point and trial (docs/results.md).
RANKS_CSV = "ranks.csv"
RANKS_SCHEMA_VERSION = 1
RANK_COLUMNS = ("op", "placement", "size_bytes", "cycle", "group", "variant", "trial", "rank", "time_in_op_us",
                "arrival_us", "gap_us", "clock_error_us", "schema_version")


def rank_lines(row: ResultRow, ranks: tuple[int, ...], in_op_us: tuple[tuple[float, ...], ...],
               arrival_us: tuple[tuple[float, ...], ...], clock_error_us: tuple[float, ...],
               gap_us: tuple[tuple[float | None, ...], ...]) -> list[list[Any]]:
    """ranks.csv's lines for one point: one per trial and rank (`ranks`: the world rank of each of the
    op's ranks). Times to 0.1 us, a tenth of the finest resolution a gloo or NCCL op reaches, which keeps
    a line near 65 bytes: 1,024 ranks x 30 sizes x 1 trial is about 2 MB."""
    point = [row.op, row.placement, row.size_bytes, "" if row.cycle is None else row.cycle, row.group, row.variant]
    return [[*point, trial, ranks[index], f"{inside[index]:.1f}", f"{arrival_us[trial][index]:.1f}",
             _tenth(gap_us[trial][index] if gap_us else None), f"{clock_error_us[index]:.1f}",
             RANKS_SCHEMA_VERSION]
            for trial, inside in enumerate(in_op_us) for index in range(len(ranks))]


def _tenth(value: float | None) -> str:
    """A time to 0.1 us, or an empty cell where it is not known."""
    return "" if value is None else f"{value:.1f}"
