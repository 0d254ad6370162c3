"""ResultRows for the tests: one builder, run folders and their results.csv, an nccl-tests log read, a lookup."""

from __future__ import annotations

from pathlib import Path

from nccl_bench.results.csv_appender import ResultsWriter
from nccl_bench.results.schema import ResultRow

MiB = 1024 * 1024
TIME_US = 100.0  # a row's time when it names neither its time nor its busbw
_FOLLOWS = object()  # a measure not named: it follows from the other


def row(op="all_reduce", size_bytes=MiB, time_us=_FOLLOWS, trials=1, spread=None, *, busbw=_FOLLOWS, peak=None,
        **changes) -> ResultRow:
    """A plausible row; any other field is named in `changes`.

    Name its time, its busbw, or both: the one not named follows from the other at busbw factor 1 (exact
    arithmetic: busbw = size / time / 1e3), and with neither the time is TIME_US; busbw None is a row
    with no bandwidth. algbw is the busbw over busbw_factor; count is float32 elements of the size; p50
    and p99 are the time. spread: time_min_us and time_max_us at the time -/+ spread (none without one).
    peak: peak_gbps, with the pct_of_peak it gives."""
    if time_us is _FOLLOWS:
        time_us = TIME_US if busbw is _FOLLOWS or busbw is None else size_bytes / busbw / 1e3
    if busbw is _FOLLOWS:
        busbw = None if time_us is None else size_bytes / time_us / 1e3
        algbw = busbw
    else:
        factor = changes.get("busbw_factor", 1.0)
        algbw = None if busbw is None else busbw / factor if factor else changes.get("algbw_gbps")
    lo, hi = (None, None) if spread is None or time_us is None else (time_us - spread, time_us + spread)
    fields = dict(
        op=op, placement="in_place", size_bytes=size_bytes, count=size_bytes // 4, dtype="float",
        redop="sum", root=-1, world_size=2, nodes=1, backend="gloo", iters=10, trials=trials,
        time_us=time_us, time_min_us=lo, time_max_us=hi, p50_us=time_us, p99_us=time_us,
        algbw_gbps=algbw, busbw_gbps=busbw, busbw_factor=1.0, wrong=0, max_time_rank=0, agg="max",
    )
    if peak is not None:
        fields.update(peak_gbps=peak, pct_of_peak=None if busbw is None else 100 * busbw / peak)
    return ResultRow(**{**fields, **changes})


def write_run(folder: Path, rows) -> Path:
    """A run folder holding `rows` in results.csv, written as a sweep writes it (appended if it exists)."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(folder)
    for one in rows:
        writer.append(one)
    writer.close()
    return folder


def results_csv(folder: Path, rows) -> str:
    """The text of results.csv once write_run has written `rows` into `folder`."""
    return (write_run(folder, rows) / "results.csv").read_text(encoding="utf-8")


def rows_on_disk(folder: Path) -> int:
    """How many rows a running sweep's results.csv holds so far (0 before it exists)."""
    try:
        return max(0, len((folder / "results.csv").read_text().splitlines()) - 1)
    except OSError:
        return 0


def log_rows(text: str, **hints) -> list[ResultRow]:
    """A log's rows as the loader reads them: one pass over its lines (nccltests_log.scan_log)."""
    from nccl_bench.results import nccltests_log

    return nccltests_log.scan_log(text.splitlines(), **hints).rows


def row_at(rows, size_bytes: int, placement: str) -> ResultRow:
    """The one row of `rows` at this size and placement (fails if there is none, or more)."""
    [found] = [r for r in rows if r.size_bytes == size_bytes and r.placement == placement]
    return found


def write_ranks_run(folder: Path, sizes, in_op_us, late_rank=None, arrival_us=None, gap_us=None) -> Path:
    """A hand-made sweep folder of all_reduce in place at `sizes` on len(in_op_us) ranks: results.csv, and
    ranks.csv as the sweep writes it (schema.rank_lines, one trial), rank r spending in_op_us[r] in the op at
    every size and arriving arrival_us[r] after the earliest (0 for all without it), with gap_us[r] outside
    the op before each call (empty cells without it, as a GPU's sweep writes); late_rank named on the rows."""
    from nccl_bench.results.csv_appender import RanksWriter
    from nccl_bench.results.schema import rank_lines

    ranks = tuple(range(len(in_op_us)))
    arrivals = tuple(arrival_us or [0.0] * len(ranks))
    rows = [row(size_bytes=size, world_size=len(ranks), late_rank=late_rank,
                late_host="" if late_rank is None else f"node{late_rank:03d}",
                late_us=None if late_rank is None else max(arrivals)) for size in sizes]
    writer = RanksWriter(folder.mkdir(parents=True, exist_ok=True) or folder)
    for one in rows:
        writer.append_lines(rank_lines(one, ranks, (tuple(in_op_us),), (arrivals,), (0.0,) * len(ranks),
                                       (tuple(gap_us) if gap_us else (None,) * len(ranks),)))
    writer.close()
    return write_run(folder, rows)
