"""Algorithm and bus bandwidth, exactly as nccl-tests' doc/PERFORMANCE.md defines them: the formulas
and the three bus-bandwidth factors; units/op_table.py gives each op its factor.

algbw = size / time, with `size` the op's nccl-tests byte count (see units/op_table.py).
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


def algbw_gbps(size_bytes: int, time_us: float | None) -> float | None:
    """Bytes per second in units of 1e9; None when there is no time to divide by."""
    if time_us is None or time_us <= 0:
        return None
    return size_bytes / (time_us * 1e-6) / BYTES_PER_GB


def busbw_gbps(algbw: float | None, factor: float | None) -> float | None:
    if algbw is None or factor is None:
        return None
    return algbw * factor
