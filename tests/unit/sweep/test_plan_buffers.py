"""The sweep's send/receive stores: sized by the points that really take views of them."""

from __future__ import annotations

from nccl_bench.sweep.plan import buffer_bytes, plan_points
from nccl_bench.sweep.sweep_config import SweepConfig

MIB = 1024**2


def _stores(ops, inplace=None, size="64M", world=2):
    points, _ = plan_points(SweepConfig(ops=ops, sizes=(64 * MIB,), inplace=inplace), world, on_gpu=False)
    return buffer_bytes(points, 4)


def test_in_place_only_ops_need_no_send_store():
    assert _stores(("all_reduce",)) == (0, 64 * MIB)
    assert _stores(("broadcast", "reduce")) == (0, 64 * MIB)


def test_out_of_place_all_gather_needs_both_stores():
    # send: one rank's chunk (64M / 2); receive: the gathered 64M
    assert _stores(("all_gather",), inplace=False) == (32 * MIB, 64 * MIB)
    assert _stores(("all_gather",), inplace=True) == (0, 64 * MIB)


def test_in_place_reduce_scatter_lives_in_the_send_store():
    assert _stores(("reduce_scatter",), inplace=True) == (64 * MIB, 0)
    assert _stores(("reduce_scatter",)) == (64 * MIB, 32 * MIB)  # both placements


def test_stores_are_shared_by_all_ops_of_a_sweep():
    assert _stores(("all_reduce", "all_gather", "reduce_scatter")) == (64 * MIB, 64 * MIB)
