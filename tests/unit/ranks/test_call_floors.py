"""Each op's per-call floor, kept once per key of a run (ranks/runner.CallFloors): timed with the floor's own
plan (FLOOR_CALLS calls after FLOOR_WARMUP, one sample, the rows' clock and graph options kept), or taken
from the point that is the smallest message itself, on measurements made by hand."""

from __future__ import annotations

from nccl_bench.ranks.runner import FLOOR_CALLS, FLOOR_WARMUP, CallFloors, Measurement, TimingPlan

ROWS = TimingPlan(warmup=3, iters=None, min_sample_s=0.2, trials=5, agg="max", blocking=True, cuda_graph=4)


def _measured(*per_op_us: float) -> Measurement:
    return Measurement(iters=len(per_op_us), sample_means_us=(1.0,), per_op_us=per_op_us, max_time_rank=0,
                       shortest_sample_s=1.0, timer_resolution_s=1e-9)


def test_a_floor_is_timed_once_per_key_with_the_floors_own_plan():
    floors, plans = CallFloors(ROWS), []

    def time_smallest(plan: TimingPlan) -> Measurement:
        plans.append(plan)
        return _measured(30.0, 10.0, 20.0, 1000.0)  # one stall: the median call ignores it

    assert floors.floor_us(("all_reduce", "in_place"), time_smallest) == 25.0
    assert floors.floor_us(("all_reduce", "in_place"), time_smallest) == 25.0
    assert plans == [TimingPlan(warmup=FLOOR_WARMUP, iters=FLOOR_CALLS, min_sample_s=0.0, trials=1, agg="max",
                                blocking=True, cuda_graph=4)]
    assert floors.floor_us(("all_gather", "in_place"), time_smallest) == 25.0 and len(plans) == 2


def test_the_smallest_message_is_its_own_floor_once_measured():
    floors = CallFloors(ROWS)
    key = ("all_reduce", (0, 1), "float32", ())
    assert floors.floor_us(key, None) is None  # before its own measurement: no floor yet, nothing timed
    assert floors.floor_us(key, None, _measured(12.0, 14.0, 13.0)) == 13.0
    assert floors.floor_us(key, lambda plan: _measured(99.0)) == 13.0  # kept: later points are judged against it


def test_the_median_call_is_none_without_single_calls():
    assert _measured(4.0, 1.0, 2.0, 3.0).median_call_us == 2.5
    assert _measured().median_call_us is None
