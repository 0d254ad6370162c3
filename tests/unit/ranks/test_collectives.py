"""The torch side of the one table: exactly one call per spec of units/op_table, and each call leaves
what its spec says the correctness check must find."""

from __future__ import annotations

import pytest

from nccl_bench.ranks import check
from nccl_bench.ranks.collectives import CALLS, OpArgs, make_buffers
from nccl_bench.units.op_table import OPS, buffer_elems


def test_every_spec_has_exactly_one_call_and_every_call_a_spec():
    assert sorted(CALLS) == sorted(OPS)
    assert all(callable(call) for call in CALLS.values())


@pytest.mark.parametrize("op", [name for name, c in OPS.items() if c.min_world_size == 1])
def test_each_call_on_one_rank_leaves_what_its_spec_expects(single_rank, op):
    import torch
    import torch.distributed as tdist

    collective = OPS[op]
    send_elems, recv_elems = buffer_elems(collective, 64, 4, 1)
    send_store, recv_store = torch.zeros(max(send_elems, 1)), torch.zeros(max(recv_elems, 1))
    placement = collective.placements[0]
    buffers = make_buffers(collective, placement, send_store, recv_store, send_elems, recv_elems, 0, 1)
    args = OpArgs(0, 1, 0, tdist.ReduceOp.SUM if collective.reduces else None)
    buffers.recv.fill_(check.SENTINEL)
    check.fill_input(buffers.send, 0, "sum")
    CALLS[op](buffers, args)()
    segments = collective.segments(0, 1, 0, buffers.recv.numel())
    assert check.count_wrong(buffers.recv, segments, 1, "sum") == 0
