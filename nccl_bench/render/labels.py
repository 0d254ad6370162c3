"""The one table of human-facing column names and units, keyed by results.csv column.

The CSV names are the on-disk contract (results/schema.py) and never change; every rendering
for people (terminal table, Markdown, HTML, compare reports) takes its heading from here, so a
column reads the same wherever it is shown: `time (us)`, `busbw (GB/s)`, `%peak`, `flags`.
"""

from __future__ import annotations

from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT

# CSV column -> (name, unit). Units follow nccl-tests: bytes, elements, microseconds, GB/s = 1e9 B/s.
LABELS: dict[str, tuple[str, str]] = {
    "op": ("op", ""),
    "placement": ("placement", ""),
    "size_bytes": ("size", "B"),
    "count": ("count", "elements"),
    "dtype": ("type", ""),
    "redop": ("redop", ""),
    "root": ("root", ""),
    "world_size": ("ranks", ""),
    "nodes": ("nodes", ""),
    "backend": ("backend", ""),
    "iters": ("iters", ""),
    "trials": ("trials", ""),
    "time_us": ("time", "us"),
    "time_min_us": ("time min", "us"),
    "time_max_us": ("time max", "us"),
    "p50_us": ("p50", "us"),
    "p95_us": ("p95", "us"),
    "p99_us": ("p99", "us"),
    "algbw_gbps": ("algbw", "GB/s"),
    "busbw_gbps": ("busbw", "GB/s"),
    "busbw_factor": ("busbw factor", ""),
    "wrong": ("#wrong", ""),
    "max_time_rank": ("max-time rank", ""),
    "agg": ("agg", ""),
    "peak_gbps": ("peak", "GB/s"),
    "pct_of_peak": ("%peak", ""),
    "status": ("status", ""),
    "flags": ("flags", ""),
    "cycle": ("cycle", ""),
    "group": ("group", ""),
    "variant": ("variant", ""),
    "algo": ("algo", ""),
    "proto": ("proto", ""),
    "late_rank": ("late rank", ""),
    "late_host": ("late host", ""),
    "late_us": ("late by", "us"),
    "i_p99_us": ("i_p99", "us"),
    "i_cv_pct": ("i_cv%", ""),
    "launch_path_us": ("launch path", "us"),
}

# How a placement value reads for people (the CSV keeps out_of_place / in_place).
PLACEMENT_TEXT = {PLACEMENT_OUT: "out", PLACEMENT_IN: "in"}


def name(column: str) -> str:
    return LABELS[column][0]


def unit(column: str) -> str:
    """'(us)' for the second header line of a two-line table; '' when the column has no unit."""
    value = LABELS[column][1]
    return f"({value})" if value else ""


def heading(column: str) -> str:
    """Name and unit on one line: 'time (us)', 'busbw (GB/s)', '%peak'."""
    label, value = LABELS[column]
    return f"{label} ({value})" if value else label


def placement_text(placement: str) -> str:
    return PLACEMENT_TEXT.get(placement, placement)
