"""--cuda-graph in the plan: what cannot be captured is skipped with a note, or refused when nothing is left."""

from __future__ import annotations

import pytest

from nccl_bench.config import SweepConfig
from nccl_bench.errors import UserInputError
from nccl_bench.ranks import plan


def test_cuda_graph_skips_barrier_with_a_note():
    config = SweepConfig(ops=("all_reduce", "barrier"), sizes=(1024,), cuda_graph=10)
    points, notes = plan.plan_points(config, 2, on_gpu=True, torch_version="2.11.0")
    assert {p.op for p in points} == {"all_reduce"}
    assert notes == ["barrier skipped: --cuda-graph captures only ops with a bandwidth factor "
                     "(a barrier synchronizes the CPU)"]
    # without --cuda-graph, or on CPU (no capture), barrier stays
    assert "barrier" in {p.op for p in plan.plan_points(config, 2, on_gpu=False)[0]}


def test_cuda_graph_with_only_barrier_is_refused_naming_both_options():
    config = SweepConfig(ops=("barrier",), sizes=(1024,), cuda_graph=10)
    with pytest.raises(UserInputError) as caught:
        plan.plan_points(config, 2, on_gpu=True, torch_version="2.11.0")
    assert str(caught.value).startswith("--cuda-graph: nothing left to capture in --op barrier: barrier: ")


def test_cuda_graph_sendrecv_needs_torch_2_7():
    config = SweepConfig(ops=("sendrecv", "all_reduce"), sizes=(1024,), cuda_graph=4)
    points, notes = plan.plan_points(config, 2, on_gpu=True, torch_version="2.6.0+cu124")
    assert {p.op for p in points} == {"all_reduce"}
    assert notes == ["sendrecv skipped: --cuda-graph cannot capture point-to-point ops on torch 2.6.0+cu124 "
                     "(needs >= 2.7)"]
    points, notes = plan.plan_points(config, 2, on_gpu=True, torch_version="2.7.1")
    assert {p.op for p in points} == {"all_reduce", "sendrecv"} and notes == []
