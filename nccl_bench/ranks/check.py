"""Correctness check, like nccl-tests' #wrong column: known inputs in, every output element verified.

Rank r's input element i is a small integer that depends on r and i (so a chunk from the wrong
rank, or shifted by an element, is caught), repeating with period PERIOD so the expected output
of any op is a lookup into a PERIOD-long table. Small integers keep sums exact in float16 and
bfloat16 for realistic rank counts; beyond that a tolerance scaled by the dtype's epsilon applies.
Work is done in chunks so the check never needs more than a few MB besides the buffers.
"""

from __future__ import annotations

from typing import Sequence

from nccl_bench.units.op_table import Segment

PERIOD = 7
CHUNK_ELEMS = 1 << 20
SENTINEL = 0  # never a valid output: every input value is >= 1


def input_pattern(rank: int, reduce_op: str) -> list[int]:
    """One period of rank's input; products use only 1 and 2 so they cannot overflow quickly."""
    if reduce_op == "prod":
        return [1 + (i + rank) % 2 for i in range(PERIOD)]
    return [1 + (i + 3 * rank) % PERIOD for i in range(PERIOD)]


def _torch():
    import torch

    return torch


def _table(values: Sequence[float], dtype, device):
    return _torch().tensor(values, dtype=_torch().float64, device=device).to(dtype)


def reduced_table(world_size: int, reduce_op: str, dtype, device):
    """The expected reduction of all ranks' patterns, computed in the op's own dtype."""
    torch = _torch()
    if reduce_op == "avg":
        total = torch.zeros(PERIOD, dtype=torch.float64, device=device)
        for rank in range(world_size):
            total += _table(input_pattern(rank, reduce_op), torch.float64, device)
        return (total / world_size).to(dtype)
    combine = {"sum": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}[reduce_op]
    result = _table(input_pattern(0, reduce_op), dtype, device)
    for rank in range(1, world_size):
        result = combine(result, _table(input_pattern(rank, reduce_op), dtype, device))
    return result


def _tiled(table, start_index: int, length: int):
    torch = _torch()
    index = (torch.arange(length, device=table.device) + start_index) % PERIOD
    return table[index]


def fill_input(tensor, rank: int, reduce_op: str) -> None:
    """Write rank's pattern into a (possibly strided-view) 1-D tensor, chunk by chunk."""
    table = _table(input_pattern(rank, reduce_op), tensor.dtype, tensor.device)
    for start in range(0, tensor.numel(), CHUNK_ELEMS):
        length = min(CHUNK_ELEMS, tensor.numel() - start)
        tensor[start : start + length].copy_(_tiled(table, start, length))


def _tolerance(dtype, world_size: int, expected):
    torch = _torch()
    if not dtype.is_floating_point:
        return None
    eps = torch.finfo(dtype).eps
    return eps * world_size * expected.abs().to(torch.float64)


def count_wrong(output, segments: list[Segment], world_size: int, reduce_op: str) -> int:
    """Number of output elements that differ from what the segments say they must hold."""
    torch = _torch()
    wrong = 0
    tables: dict[int | None, object] = {}
    for segment in segments:
        if segment.source_rank not in tables:
            if segment.source_rank is None:
                tables[None] = reduced_table(world_size, reduce_op, output.dtype, output.device)
            else:
                tables[segment.source_rank] = _table(
                    input_pattern(segment.source_rank, reduce_op), output.dtype, output.device
                )
        table = tables[segment.source_rank]
        for offset in range(0, segment.length, CHUNK_ELEMS):
            length = min(CHUNK_ELEMS, segment.length - offset)
            got = output[segment.start + offset : segment.start + offset + length]
            expected = _tiled(table, segment.source_index + offset, length)
            tolerance = _tolerance(output.dtype, world_size, expected)
            if tolerance is None:
                wrong += int((got != expected).sum().item())
            else:
                diff = (got.to(torch.float64) - expected.to(torch.float64)).abs()
                wrong += int((~(diff <= tolerance)).sum().item())  # NaN counts as wrong
    return wrong
