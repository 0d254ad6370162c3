"""nccl-tests' numbers made into ResultRows: the one row assembly of the text reader
(results/nccltests_log.py) and the `-J` JSON reader (results/nccltests_json.py).

Both read a table into size lines (size, count, type, redop, root) of one or two placement halves
(time, algbw, busbw, #wrong); the rank count comes from the ranks the input lists, else from the
printed busbw/algbw ratio (the op's bus factor inverted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from nccl_bench.results.schema import STATUS_OK, STATUS_WRONG, ResultRow
from nccl_bench.units import op_table

# nccl-tests type names (src/common.cu test_typenames) <-> torch dtype names.
TYPE_TO_DTYPE = {
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "bfloat16": "bfloat16",
    "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
}
DTYPE_TO_TYPE = {dtype: name for name, dtype in TYPE_TO_DTYPE.items()}
# Bytes per element of each nccl-tests type (src/common.cu wordSize).
TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
              "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}

# nccl-tests times with `-a 1` by default: the per-rank mean times are averaged across ranks.
NCCL_TESTS_AGG = "avg"
NCCL_TESTS_BACKEND = "nccl"
# busbw and algbw are printed with two decimals: each may be off by this much.
_PRINTED_HALF_STEP = 0.005


@dataclass(frozen=True)
class Half:
    """One placement's numbers on a size line (nccl-tests prints out-of-place, then in-place)."""

    placement: str
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    failed: bool = False  # older releases' `error` column: the largest absolute error, not a count
    p50_us: float | None = None
    p95_us: float | None = None
    p99_us: float | None = None
    i_p99_us: float | None = None  # -I's i_p99 and i_cv%, as nccl-tests printed them
    i_cv_pct: float | None = None
    late_rank: int | None = None  # -J -I: the late process's first rank, its host, how late (per_process_max_times_us)
    late_host: str = ""
    late_us: float | None = None


@dataclass(frozen=True)
class SizeLine:
    """One size of a table: what both halves share, and the halves measured."""

    size_bytes: int
    count: int
    type_name: str
    redop: str
    root: int
    halves: tuple[Half, ...]


@dataclass(frozen=True)
class Table:
    """What the rows of one table share besides their op: where it ran, how it was timed."""

    world_size: int | None  # None: the input does not say, and no number depends on it
    nodes: int
    iters: int | None
    backend: str = NCCL_TESTS_BACKEND
    agg: str = NCCL_TESTS_AGG


def bandwidths(lines: Iterable[SizeLine]) -> list[tuple[float | None, float | None]]:
    """(algbw, busbw) of every half of the lines, for infer_world_size."""
    return [(half.algbw_gbps, half.busbw_gbps) for line in lines for half in line.halves]


def world_size_of(op: str, ranks: Iterable[int], lines: Sequence[SizeLine]) -> int | None:
    """The ranks the input lists (the highest rank + 1), else what size and count say, else what the
    printed bandwidths allow."""
    ranks = set(ranks)
    if ranks:
        return max(ranks) + 1
    return counted_world_size(op, lines) or infer_world_size(op, bandwidths(lines))


def counted_world_size(op: str, lines: Iterable[SizeLine]) -> int | None:
    """size / (count x type size) where nccl-tests prints a per-rank count: the one whole number every
    line gives, or None (another op, an unknown type, lines that disagree)."""
    if not op_table.count_is_per_rank(op):
        return None
    found = set()
    for line in lines:
        chunk = line.count * TYPE_BYTES.get(line.type_name, 0)
        if chunk <= 0:
            continue
        ranks, rest = divmod(line.size_bytes, chunk)
        if rest or ranks < 1:
            return None
        found.add(ranks)
    return found.pop() if len(found) == 1 else None


def infer_world_size(op: str, pairs: Iterable[tuple[float | None, float | None]]) -> int | None:
    """Invert the op's busbw factor: the one rank count every (algbw, busbw) printed allows.

    Each printed value may be off by half its last digit, so each row allows an interval of
    ratios and so of rank counts; the answer is the single whole number in all of them, or None
    (a factor of 1 says nothing, and large worlds are too close together to tell apart).
    """
    factor = op_table.factor_of(op)
    span = ratio_span(pairs)
    if factor is None or span is None:
        return None
    return factor.world_size(*span)


def ratio_span(pairs: Iterable[tuple[float | None, float | None]]) -> tuple[float, float] | None:
    """The busbw/algbw range every (algbw, busbw) allows, given two printed decimals; None without data."""
    low, high, seen = 0.0, math.inf, False
    for algbw, busbw in pairs:
        if algbw is None or busbw is None or algbw < 0.1:  # too few digits to say anything
            continue
        seen = True
        low = max(low, (busbw - _PRINTED_HALF_STEP) / (algbw + _PRINTED_HALF_STEP))
        high = min(high, (busbw + _PRINTED_HALF_STEP) / (algbw - _PRINTED_HALF_STEP))
    return (low, high) if seen and low <= high else None


def table_rows(op: str, lines: Sequence[SizeLine], table: Table) -> list[ResultRow]:
    """One ResultRow per half of every size line, in the order they were printed."""
    # an unknown world size is only ever left where the factor does not depend on it
    factor = op_table.bus_factor(op, table.world_size or 1)
    return [_row(op, line, half, table, factor) for line in lines for half in line.halves]


def _row(op: str, line: SizeLine, half: Half, table: Table, factor: float | None) -> ResultRow:
    if factor is None and half.algbw_gbps and half.busbw_gbps is not None:
        factor = half.busbw_gbps / half.algbw_gbps  # an op we do not know: keep the input's own ratio
    return ResultRow(
        op=op,
        placement=half.placement,
        size_bytes=line.size_bytes,
        count=line.count,
        dtype=TYPE_TO_DTYPE.get(line.type_name, line.type_name),
        redop=line.redop,
        root=line.root,
        world_size=table.world_size,
        nodes=table.nodes,
        backend=table.backend,
        iters=table.iters or 0,
        trials=1,
        time_us=half.time_us,
        time_min_us=None,
        time_max_us=None,
        p50_us=half.p50_us,
        p95_us=half.p95_us,
        p99_us=half.p99_us,
        algbw_gbps=half.algbw_gbps,
        busbw_gbps=half.busbw_gbps,
        busbw_factor=factor,
        wrong=half.wrong,
        max_time_rank=None,
        agg=table.agg,
        status=STATUS_WRONG if (half.wrong or half.failed) else STATUS_OK,
        late_rank=half.late_rank,
        late_host=half.late_host,
        late_us=half.late_us,
        i_p99_us=half.i_p99_us,
        i_cv_pct=half.i_cv_pct,
    )
