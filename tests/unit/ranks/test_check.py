"""The data check against locally simulated collectives: right data passes, any corruption is counted."""

import pytest
import torch

from nccl_bench.ranks import check
from nccl_bench.units.op_table import OPS


def _inputs(n, elems, dtype, redop):
    tensors = []
    for rank in range(n):
        t = torch.zeros(elems, dtype=dtype)
        check.fill_input(t, rank, redop)
        tensors.append(t)
    return tensors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int64])
@pytest.mark.parametrize("redop", ["sum", "prod", "min", "max"])
def test_all_reduce_result_passes_and_corruption_is_counted(dtype, redop):
    n, elems = 3, 50
    inputs = _inputs(n, elems, dtype, redop)
    combine = {"sum": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}[redop]
    result = inputs[0].clone()
    for t in inputs[1:]:
        result = combine(result, t)
    segments = OPS["all_reduce"].expected(0, n, 0, elems)
    assert check.count_wrong(result, segments, n, redop) == 0
    result[7] += 1
    result[49] = 0
    assert check.count_wrong(result, segments, n, redop) == 2


def test_avg_uses_a_tolerance():
    n, elems = 3, 21
    inputs = _inputs(n, elems, torch.float32, "avg")
    result = sum(inputs) / n
    segments = OPS["all_reduce"].expected(0, n, 0, elems)
    assert check.count_wrong(result, segments, n, "avg") == 0


def test_all_gather_catches_a_chunk_from_the_wrong_rank():
    n, chunk = 4, 10
    inputs = _inputs(n, chunk, torch.float32, "sum")
    gathered = torch.cat(inputs)
    segments = OPS["all_gather"].expected(1, n, 0, n * chunk)
    assert check.count_wrong(gathered, segments, n, "sum") == 0
    swapped = torch.cat([inputs[1], inputs[0], inputs[2], inputs[3]])
    assert check.count_wrong(swapped, segments, n, "sum") > 0


def test_all_to_all_and_reduce_scatter_segments_match_a_simulation():
    n, chunk = 3, 5
    sends = _inputs(n, n * chunk, torch.int32, "sum")
    for rank in range(n):
        received = torch.cat([sends[k][rank * chunk:(rank + 1) * chunk] for k in range(n)])
        assert check.count_wrong(received, OPS["all_to_all"].expected(rank, n, 0, n * chunk), n, "sum") == 0
        reduced = sum(s[rank * chunk:(rank + 1) * chunk] for s in sends)
        assert check.count_wrong(reduced, OPS["reduce_scatter"].expected(rank, n, 0, chunk), n, "sum") == 0


def test_sentinel_is_never_a_valid_value():
    assert all(v >= 1 for r in range(8) for op in ("sum", "prod") for v in check.input_pattern(r, op))
    out = torch.zeros(16)
    assert check.count_wrong(out, OPS["broadcast"].expected(0, 2, 0, 16), 2, "sum") == 16


def test_nan_is_wrong():
    n, elems = 2, 14
    result = sum(_inputs(n, elems, torch.float32, "sum"))
    result[3] = float("nan")
    assert check.count_wrong(result, OPS["all_reduce"].expected(0, n, 0, elems), n, "sum") == 1
