"""What a sweep says or refuses before it starts: from its plan alone."""

from __future__ import annotations

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import build_config, flags_of
from nccl_bench.sweep import plan
from nccl_bench.sweep.plan import plan_run
from nccl_bench.sweep.sweep_config import SweepConfig, ignored_options


def test_a_long_sweep_is_announced_with_its_floor():
    config = build_config(SweepConfig, {"min_bytes": "1K", "max_bytes": "2M", "step_bytes": "1K", "trials": 10,
                                        "backend": "gloo"})
    plan = plan_run(config, 2)
    assert plan.before_start == (
        "this sweep takes at least 1.1 h (2,048 point(s) x (5 warmup + 10 trial(s) x 200 ms)); "
        "Ctrl-C keeps every finished point",
    )


def test_a_short_sweep_says_nothing():
    assert plan_run(build_config(SweepConfig, {"sizes": "1K,1M", "backend": "gloo"}), 2).before_start == ()


def test_fixed_iters_are_counted_at_the_floor_per_op():
    # 1 point x (1,000,000 warmup + 1,000 trials x 1,000,000 iters) x 5 us = 1.4 h on CPU
    config = build_config(SweepConfig, {"sizes": "1K", "ops": ["all_gather"], "inplace": False, "warmup": 1_000_000,
                           "iters": 1_000_000, "trials": 1000, "backend": "gloo"})
    assert plan_run(config, 2).before_start[0].startswith("this sweep takes at least 1.4 h")
    config = build_config(SweepConfig, {"sizes": "1K,2K,4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M", "ops": ["all"],
                           "warmup": 1_000_000, "iters": 1_000_000, "trials": 1000, "backend": "gloo"})
    with pytest.raises(UserInputError, match="would take at least") as info, flags_of(SweepConfig):
        plan_run(config, 2)
    assert info.value.option == "--iters"


def test_options_no_chosen_op_uses_are_named_once():
    config = build_config(SweepConfig, {"ops": ["all_gather"], "reduce_op": "max", "root": 1, "sizes": "1K"})
    assert ignored_options(config) == [
        "--reduce-op max is ignored: none of all_gather reduces",
        "--root 1 is ignored: none of all_gather has a root",
    ]
    assert ignored_options(build_config(SweepConfig, {"ops": ["reduce"], "reduce_op": "max", "root": 1})) == []
    assert ignored_options(build_config(SweepConfig, {"ops": ["barrier"], "dtype": "int8"})) == [
        "--dtype int8 is ignored: none of barrier sends data"
    ]


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
    with pytest.raises(UserInputError) as caught, flags_of(SweepConfig):
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


def test_a_busbw_floor_at_one_rank_is_refused_for_ops_whose_busbw_is_zero_there():
    config = build_config(SweepConfig, {"sizes": "1K", "ops": ["all_reduce", "broadcast"], "min_busbw_gbps": 1e-6,
                                        "backend": "gloo"})
    with pytest.raises(UserInputError) as refused, flags_of(SweepConfig):
        plan_run(config, 1)
    assert str(refused.value) == ("--min-busbw: busbw is 0 by definition at 1 rank for all_reduce ((n-1)/n of the "
                                  "data crosses between ranks); judge a run of 2 ranks or more")
    assert plan_run(config, 2).points  # two ranks: judged
    broadcast = build_config(SweepConfig, {"sizes": "1K", "ops": ["broadcast"], "min_busbw_gbps": 1e-6,
                                           "backend": "gloo"})
    assert plan_run(broadcast, 1).points  # factor 1 at any rank count: busbw means the copy speed
