"""The metrics file of --prom: a sweep's rows and a doctor's verdicts in Prometheus' text exposition
format (version 0.0.4).

Names follow Prometheus' naming guide: one prefix, base units in the name (`_bytes_per_second`,
`_seconds`, never GB/s), gauges only. Labels are few and of low cardinality: what a row is (op,
placement, size in bytes, dtype) and where it ran (world size, nodes, backend); for the doctor the
host, the pair and the rail. Every value is the CSV's or doctor.json's number in base units
(busbw_gbps x 1e9), so an alert and the results on disk never disagree. Pure: text out; the CLI writes it.

A sweep's file also holds its rows under the names and labels NVIDIA's NCCL Inspector exports
(ext-profiler/inspector, inspector_prom.cc: `nccl_bus_bandwidth_gbs` in GB/s and
`nccl_collective_exec_time_microseconds`, labelled version, slurm_job_id, node, gpu, comm_name, n_nodes,
nranks, collective, message_size, algo_proto), so dashboards made for the Inspector show a benchmark's
figures beside a job's own. Like the Inspector, rows of one label set (sizes in one message_size bucket,
both placements, dtypes) are one sample: the geometric mean of their busbw, the mean of their times.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping, Sequence

import nccl_bench
from nccl_bench.results.schema import ResultRow
from nccl_bench.units.bandwidth import BYTES_PER_GB
from nccl_bench.units.op_table import OPS

PREFIX = "nccl_bench_"
SECONDS_PER_US = 1e-6
COMPLETE = "complete"  # meta.json's status of a run that measured everything it planned
SUSPECT_KINDS = ("node", "link", "rail", "missing", "config")  # verdicts.Suspect.kind, roster.MISSING, config_check
# A label name is [a-zA-Z_][a-zA-Z0-9_]*; version keys are ours, but keep any other character out.
_LABEL_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")

# (name without the prefix, help, the row's value in base units or None)
_ROW_METRICS = (
    ("busbw_bytes_per_second", "Bus bandwidth of each measured point (nccl-tests' busbw; the CSV's busbw_gbps x 1e9).",
     lambda r: None if r.busbw_gbps is None else r.busbw_gbps * BYTES_PER_GB),
    ("algbw_bytes_per_second", "Algorithm bandwidth, size / time (the CSV's algbw_gbps x 1e9).",
     lambda r: None if r.algbw_gbps is None else r.algbw_gbps * BYTES_PER_GB),
    ("time_seconds", "Mean time of one operation (the CSV's time_us x 1e-6).",
     lambda r: None if r.time_us is None else r.time_us * SECONDS_PER_US),
    ("wrong_elements", "Output elements that failed the data check, summed over ranks (0: all correct).",
     lambda r: r.wrong),
)


def sweep_metrics(rows: Sequence[ResultRow], meta: Mapping[str, Any], now_s: float,
                  slurm_job_id: str | None = None) -> str:
    """Every measured row's gauges, then the run's info and timestamp, then the rows as NCCL Inspector names
    them; meta is the run's meta.json, slurm_job_id the Slurm job's (SLURM_JOB_ID) where there is one."""
    lines: list[str] = []
    for name, help_text, value_of in _ROW_METRICS:
        samples = [(_row_labels(row), value_of(row)) for row in rows]
        lines += _family(name, help_text, [(labels, value) for labels, value in samples if value is not None])
    lines += _run_lines("sweep", meta, now_s)
    lines += inspector_lines(rows, meta, slurm_job_id)
    return "\n".join(lines) + "\n"


INSPECTOR_COMM_NAME = "nccl_bench"  # the comm_name label: a panel tells the benchmark's series from a job's
_SIZE_UNITS = ("B", "KB", "MB", "GB", "TB")


def inspector_message_size(size_bytes: int) -> str:
    """The Inspector's message_size bucket: the size in its largest 1024-power unit, floored, and the next
    whole number ("1-2MB" for 1 MiB to just under 2 MiB, "134-135MB"); "0B" for nothing."""
    if size_bytes <= 0:
        return "0B"
    value, unit = float(size_bytes), 0
    while value >= 1024 and unit < len(_SIZE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    lower = max(1, math.floor(value))
    return f"{lower}-{lower + 1}{_SIZE_UNITS[unit]}"


def inspector_lines(rows: Sequence[ResultRow], meta: Mapping[str, Any], slurm_job_id: str | None = None) -> list[str]:
    """The rows as the Inspector's two collective families (see the module's doc)."""
    buckets: dict[tuple, list[ResultRow]] = {}
    node = str((meta.get("hostnames") or ["unknown"])[0])
    job = slurm_job_id or "unknown"  # the Inspector's word for a label it cannot fill
    for row in rows:
        spec = OPS.get(row.op)
        collective = None if spec is None else spec.nccl_function  # NCCL's name; None: torch's sends, no collective
        if collective is None or row.time_us is None or row.world_size is None:
            continue
        algo_proto = f"{row.algo}_{row.proto}" if row.algo and row.proto else "unknown"
        key = (("version", f"nccl_bench {nccl_bench.__version__}"), ("slurm_job_id", job), ("node", node),
               ("gpu", "all"), ("comm_name", INSPECTOR_COMM_NAME), ("n_nodes", row.nodes),
               ("nranks", row.world_size), ("collective", collective),
               ("message_size", inspector_message_size(row.size_bytes)), ("algo_proto", algo_proto))
        buckets.setdefault(key, []).append(row)
    bandwidths, times = [], []
    for key, members in buckets.items():
        labels = dict(key)
        positive = [r.busbw_gbps for r in members if r.busbw_gbps]
        if positive:  # one row's figure as it is on disk; several, their geometric mean
            mean = positive[0] if len(positive) == 1 else math.exp(sum(map(math.log, positive)) / len(positive))
            bandwidths.append((labels, mean))
        times.append((labels, sum(r.time_us for r in members) / len(members)))
    return (_family("bus_bandwidth_gbs", "NCCL bus bandwidth for collective operations, GB/s (1e9 B/s), as NCCL "
                    "Inspector names it: the geometric mean of the rows of these labels.", bandwidths, prefix="nccl_")
            + _family("collective_exec_time_microseconds", "Execution time of one collective in microseconds, as "
                      "NCCL Inspector names it: the mean of the rows of these labels.", times, prefix="nccl_"))


def doctor_metrics(verdicts: Mapping[str, Any], meta: Mapping[str, Any], now_s: float) -> str:
    """Each host's intra-node busbw, each pair's busbw (rail by rail), a 0/1 suspect gauge per host and
    kind, then the run's info and timestamp; verdicts is doctor.json's object, meta the run's common meta."""
    nodes = verdicts["nodes"]
    lines = _family(
        "doctor_node_busbw_bytes_per_second",
        "Intra-node all_reduce busbw of each host, best attempt (doctor.json's intra_busbw_gbps x 1e9).",
        [({"host": n["host"]}, n["intra_busbw_gbps"] * BYTES_PER_GB)
         for n in nodes if n["intra_busbw_gbps"] is not None])
    lines += _family(
        "doctor_pair_busbw_bytes_per_second",
        "Busbw of each node pair on each rail, best attempt (doctor.json's pairs busbw_gbps x 1e9).",
        [({"pair": ",".join(p["hosts"]), "rail": p["rail"]}, p["busbw_gbps"] * BYTES_PER_GB)
         for p in verdicts["pairs"]])
    named = {(host, s["kind"]) for s in verdicts["suspects"] for host in s["hosts"]}
    missing = [host for host, kind in sorted(named) if kind == "missing"]  # expected hosts that have no node entry
    hosts = list(dict.fromkeys([n["host"] for n in nodes] + missing))
    lines += _family(
        "doctor_suspect",
        "1 when the doctor names the host in a suspect of this kind (node, link, rail, missing: expected, never "
        "joined, config: its configuration differs from the fleet's or its hardware is degraded), else 0.",
        [({"host": host, "kind": kind}, int((host, kind) in named)) for host in hosts for kind in SUSPECT_KINDS])
    lines += _run_lines("doctor", meta, now_s)
    return "\n".join(lines) + "\n"


def run_metrics(command: str, meta: Mapping[str, Any], now_s: float) -> str:
    """The run's lines alone (info, completion, timestamp): the file of a run that has measured nothing yet,
    or never will (refused, or ended before its first row)."""
    return "\n".join(_run_lines(command, meta, now_s)) + "\n"


def _row_labels(row: ResultRow) -> dict[str, Any]:
    return {"op": row.op, "placement": row.placement, "size_bytes": row.size_bytes, "dtype": row.dtype,
            "world_size": "" if row.world_size is None else row.world_size, "nodes": row.nodes, "backend": row.backend}


def _run_lines(command: str, meta: Mapping[str, Any], now_s: float) -> list[str]:
    versions = {f"{_LABEL_NAME_BAD.sub('_', key)}_version": value for key, value in meta.get("versions", {}).items()}
    info = {"command": command, "status": meta.get("status", ""), "backend": meta.get("backend", ""),
            "world_size": meta.get("world_size", ""), "nodes": meta.get("nodes", ""),
            "nccl_bench_version": nccl_bench.__version__, **versions}
    lines = _family("run_info", "The run these metrics come from: its command, status, layout and versions (value 1).",
                    [(info, 1)])
    lines += _family("run_complete",
                     "1 when the run completed; 0 while it runs, or when it failed, was interrupted or refused: the "
                     "file then holds only what it measured, never an earlier run's metrics.",
                     [({"command": command}, int(meta.get("status") == COMPLETE))])
    lines += _family("run_timestamp_seconds",
                     "Unix time the metrics were written; alert when it grows old (the run stopped being repeated).",
                     [({"command": command}, now_s)])
    return lines


def _family(name: str, help_text: str, samples: Iterable[tuple[Mapping[str, Any], float]],
            prefix: str = PREFIX) -> list[str]:
    samples = list(samples)
    if not samples:
        return []
    full = prefix + name
    lines = [f"# HELP {full} {_escape_help(help_text)}", f"# TYPE {full} gauge"]
    for labels, value in samples:
        text = ",".join(f'{key}="{_escape_label(str(val))}"' for key, val in labels.items())
        lines.append(f"{full}{{{text}}} {_number(value)}")
    return lines


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_label(text: str) -> str:
    """Label values: backslash, double quote and line feed escaped, as the format requires."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")
