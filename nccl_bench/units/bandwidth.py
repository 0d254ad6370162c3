"""Algorithm and bus bandwidth, exactly as nccl-tests' doc/PERFORMANCE.md defines them, and the
one table of what nccl-tests says of each op: its bus-bandwidth factor and the binary measuring it.

algbw = size / time, with `size` the op's nccl-tests byte count (see ranks/collectives.py).
busbw = algbw * factor, where the factor makes the figure comparable to the link speed
whatever the rank count: a ring all_reduce moves 2(n-1)/n of the data over each link.
GB/s here is 1e9 bytes per second, as nccl-tests prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class BusFactor:
    """busbw/algbw on n ranks: `scale` x (n-1)/n, or 1 whatever n when scale is None."""

    formula: str  # as PERFORMANCE.md writes it
    scale: float | None

    def __call__(self, world_size: int) -> float:
        if self.scale is None:
            return 1.0
        return self.scale * (world_size - 1) / world_size

    def world_size(self, low_ratio: float, high_ratio: float) -> int | None:
        """The one rank count whose factor lies in [low_ratio, high_ratio], or None.

        factor = scale (n-1)/n gives n = scale / (scale - factor); a factor that does not depend on
        n says nothing, and a range naming several rank counts names none.
        """
        if self.scale is None:
            return None
        top = self.scale
        low, high = (top / (top - ratio) if ratio < top else math.inf for ratio in (max(low_ratio, 0.0), high_ratio))
        # capped: a ratio at the factor's limit leaves the range open above, naming many counts (so none)
        candidates = range(max(2, math.ceil(low)), math.floor(min(high, low + 3)) + 1)
        return candidates[0] if len(candidates) == 1 else None


# Reduce-scatter then all-gather: each rank sends and receives (n-1)/n twice.
ALL_REDUCE = BusFactor("2(n-1)/n", 2.0)
# all_gather, reduce_scatter, all_to_all(v), gather, scatter: (n-1)/n of the data crosses links.
GATHER_LIKE = BusFactor("(n-1)/n", 1.0)
# broadcast, reduce, send/recv: the whole buffer crosses each link once.
WHOLE_BUFFER = BusFactor("1", None)


@dataclass(frozen=True)
class OpUnits:
    """What nccl-tests says of one op: the binary measuring it and its bus-bandwidth factor."""

    binary: str  # the binary's stem: nccl-tests builds <binary>_perf
    factor: BusFactor | None  # None: not known here, so each log's own busbw/algbw is kept
    # nccl-tests prints one rank's chunk as `count` and the whole buffer as `size` (its *GetCollByteCount:
    # paramcount is count/nranks), so size = count x type size x n ranks.
    count_per_rank: bool = False


# Op name -> its units. Adding a collective: one entry here, one in units/op_table.OPS (every op's
# name, in order) and one in ranks/collectives.REGISTRY; the registry, the nccl-tests reader and
# writer, and the rank-count inference read this table.
# barrier moves no data and has no nccl-tests binary, so it has no entry.
OPS: dict[str, OpUnits] = {
    "all_reduce": OpUnits("all_reduce", ALL_REDUCE),
    "all_gather": OpUnits("all_gather", GATHER_LIKE, count_per_rank=True),
    "reduce_scatter": OpUnits("reduce_scatter", GATHER_LIKE, count_per_rank=True),
    "broadcast": OpUnits("broadcast", WHOLE_BUFFER),
    "reduce": OpUnits("reduce", WHOLE_BUFFER),
    "gather": OpUnits("gather", GATHER_LIKE, count_per_rank=True),
    "scatter": OpUnits("scatter", GATHER_LIKE, count_per_rank=True),
    "all_to_all": OpUnits("alltoall", GATHER_LIKE, count_per_rank=True),
    "all_to_allv": OpUnits("alltoallv", GATHER_LIKE),  # of the whole buffer, however much is sent
    "sendrecv": OpUnits("sendrecv", WHOLE_BUFFER),
}
# nccl-tests binary stem -> op name.
OP_OF_BINARY: dict[str, str] = {units.binary: op for op, units in OPS.items()}
def factor_of(op: str) -> BusFactor | None:
    """The op's bus-bandwidth factor; None for an op without one (barrier, unknown)."""
    units = OPS.get(op)
    return None if units is None else units.factor


def count_is_per_rank(op: str) -> bool:
    """nccl-tests prints `count` of one rank's chunk for this op (size = count x type size x ranks)."""
    units = OPS.get(op)
    return units is not None and units.count_per_rank


def rank_count_matters(op: str) -> bool:
    """busbw depends on the rank count for this op (a factor such as (n-1)/n); not for broadcast, reduce,
    sendrecv (factor 1) or an op whose own busbw/algbw is kept."""
    factor = factor_of(op)
    return factor is not None and factor.scale is not None


def bus_factor(op: str, world_size: int) -> float | None:
    """busbw/algbw for `op` at `world_size` ranks; None for an op without one (barrier, unknown)."""
    factor = factor_of(op)
    return None if factor is None else factor(world_size)


def op_of_binary(stem: str) -> str:
    """Our name of an nccl-tests binary stem (alltoall -> all_to_all); unknown stems are kept."""
    return OP_OF_BINARY.get(stem, stem)


def binary_of(op: str) -> str:
    """The nccl-tests binary measuring `op` (all_to_all -> alltoall_perf); an unknown op keeps its name."""
    units = OPS.get(op)
    return f"{op if units is None else units.binary}_perf"


def algbw_gbps(size_bytes: int, time_us: float | None) -> float | None:
    """Bytes per second in units of 1e9; None when there is no time to divide by."""
    if time_us is None or time_us <= 0:
        return None
    return size_bytes / (time_us * 1e-6) / BYTES_PER_GB


def busbw_gbps(algbw: float | None, factor: float | None) -> float | None:
    if algbw is None or factor is None:
        return None
    return algbw * factor
