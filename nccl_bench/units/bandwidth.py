"""Algorithm and bus bandwidth, exactly as nccl-tests' doc/PERFORMANCE.md defines them.

algbw = size / time, with `size` the op's nccl-tests byte count (see ranks/collectives.py).
busbw = algbw * factor, where the factor makes the figure comparable to the link speed
whatever the rank count: a ring all_reduce moves 2(n-1)/n of the data over each link.
GB/s here is 1e9 bytes per second, as nccl-tests prints.
"""

from __future__ import annotations

from typing import Callable

BYTES_PER_GB = 1e9


def all_reduce_factor(world_size: int) -> float:
    """Reduce-scatter then all-gather: each rank sends and receives (n-1)/n twice."""
    return 2 * (world_size - 1) / world_size


def gather_like_factor(world_size: int) -> float:
    """all_gather, reduce_scatter, all_to_all, gather, scatter: (n-1)/n of the data crosses links."""
    return (world_size - 1) / world_size


def unit_factor(world_size: int) -> float:
    """broadcast, reduce, send/recv: the whole buffer crosses each link once."""
    return 1.0


# op -> (formula as PERFORMANCE.md writes it, factor of the world size). The collectives registry
# and the nccl-tests reader both look factors up here; barrier moves no data and has none.
BUS_FACTORS: dict[str, tuple[str, Callable[[int], float]]] = {
    "all_reduce": ("2(n-1)/n", all_reduce_factor),
    "all_gather": ("(n-1)/n", gather_like_factor),
    "reduce_scatter": ("(n-1)/n", gather_like_factor),
    "broadcast": ("1", unit_factor),
    "reduce": ("1", unit_factor),
    "gather": ("(n-1)/n", gather_like_factor),
    "scatter": ("(n-1)/n", gather_like_factor),
    "all_to_all": ("(n-1)/n", gather_like_factor),
    "sendrecv": ("1", unit_factor),
}


def bus_factor(op: str, world_size: int) -> float | None:
    """busbw/algbw for `op` at `world_size` ranks; None for an op without one (barrier, unknown)."""
    entry = BUS_FACTORS.get(op)
    return None if entry is None else entry[1](world_size)


def algbw_gbps(size_bytes: int, time_us: float | None) -> float | None:
    """Bytes per second in units of 1e9; None when there is no time to divide by."""
    if time_us is None or time_us <= 0:
        return None
    return size_bytes / (time_us * 1e-6) / BYTES_PER_GB


def busbw_gbps(algbw: float | None, factor: float | None) -> float | None:
    if algbw is None or factor is None:
        return None
    return algbw * factor
