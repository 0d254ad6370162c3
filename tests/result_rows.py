"""ResultRow helpers shared by the tests: a factory, a run folder writer, a lookup by size and placement."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nccl_bench.results.csv_appender import ResultsWriter
from nccl_bench.results.schema import ResultRow

MiB = 1024 * 1024


def row(op="all_reduce", size_bytes=MiB, time_us=100.0, trials=1, spread=None, **changes) -> ResultRow:
    """A plausible row whose busbw follows from its time (factor 1 keeps the arithmetic exact)."""
    busbw = None if time_us is None else size_bytes / time_us / 1e3
    lo, hi = (None, None) if spread is None else (time_us - spread, time_us + spread)
    base = ResultRow(
        op=op, placement="in_place", size_bytes=size_bytes, count=size_bytes // 4, dtype="float",
        redop="sum", root=-1, world_size=2, nodes=1, backend="gloo", iters=10, trials=trials,
        time_us=time_us, time_min_us=lo, time_max_us=hi, p50_us=time_us, p99_us=time_us,
        algbw_gbps=busbw, busbw_gbps=busbw, busbw_factor=1.0, wrong=0, slowest_rank=0, agg="max",
    )
    return dataclasses.replace(base, **changes)


def write_run(folder: Path, rows) -> Path:
    """A run folder holding `rows` in results.csv, written as a sweep writes it (appended if it exists)."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(folder)
    for one in rows:
        writer.append(one)
    writer.close()
    return folder


def row_at(rows, size_bytes: int, placement: str) -> ResultRow:
    """The one row of `rows` at this size and placement (fails if there is none, or more)."""
    [found] = [r for r in rows if r.size_bytes == size_bytes and r.placement == placement]
    return found
