"""p50 and the mean time describe the same work: on GPU the per-op latencies come from one extra
sample that records an event after every op, and what those events cost is taken off each op.

A real single-rank gloo group and a virtual clock that behaves like the CUDA clock (per-op times
only when asked for, each recorded event adding its cost), so every figure is exact.
"""

from __future__ import annotations

import pytest

from nccl_bench.ranks.clocks import CpuClock, per_event_cost_s, without_event_cost
from nccl_bench.ranks.runner import PointRunner, TimingPlan
from nccl_bench.units import stats

OP_NS = 20_000  # a launch-bound op: 20 us of host time each
EVENT_NS = 12_000  # what recording an event after it adds, as the H100 probe suggested (27 vs 40 us)


class _Virtual:
    now = 0


class _EventClock(CpuClock):
    """The CUDA clock's shape on virtual time: only a per-op sample records (and pays for) an event per op."""

    resolution_s = 1e-9
    now_ns = staticmethod(lambda: _Virtual.now)

    def __init__(self, ops: int, blocking: bool, per_op: bool, events=None):
        super().__init__(ops, blocking, per_op, events)
        self._per_op = per_op

    def mark(self, index: int) -> None:
        if self._per_op:
            _Virtual.now += EVENT_NS
        super().mark(index)

    def finish(self):
        total_s, per_op = super().finish()
        return total_s, per_op if self._per_op else []


def _op():
    _Virtual.now += OP_NS


def test_p50_of_a_launch_bound_op_equals_its_mean_time(single_rank):
    _Virtual.now = 0
    plan = TimingPlan(warmup=0, iters=50, min_sample_s=0.01, trials=2, agg="max")
    measurement = PointRunner(single_rank, plan, clock=_EventClock).measure(_op)
    assert measurement.time_us == pytest.approx(20.0)
    assert len(measurement.per_op_us) == 50
    assert stats.median(list(measurement.per_op_us)) == pytest.approx(20.0)  # 32 us uncorrected


def test_the_event_cost_is_the_excess_per_call_and_never_negative():
    # per-op sample: 50 calls in 1.6 ms (32 us each); timed: 100 calls in 2 ms (20 us each)
    assert per_event_cost_s(1.6e-3, 50, 2.0e-3, 100) == pytest.approx(12e-6)
    # a bandwidth-bound op hides the events behind the GPU's work: nothing to take off
    assert per_event_cost_s(0.99e-3, 10, 1.0e-3, 10) == 0.0
    assert per_event_cost_s(1.0, 0, 1.0, 10) == 0.0
    assert without_event_cost([30e-6, 10e-6, 32e-6], 12e-6) == pytest.approx([18e-6, 0.0, 20e-6])
