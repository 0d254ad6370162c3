"""A timed sample shorter than --min-sample-ms is timed again: the rule, and the runner applying it.

The runner test uses a real single-rank gloo process group and a virtual clock, so the op
durations (and every expected count) are exact whatever the host's load.
"""

from __future__ import annotations

import pytest

from nccl_bench.ranks.runner import (
    MAX_SHORT_SAMPLE_RETRIES,
    CpuClock,
    PointRunner,
    TimingPlan,
    calls_for_full_sample,
)


@pytest.mark.parametrize(
    ("calls", "elapsed_s", "expected"),
    [
        (100, 0.200, None),  # lasted the floor: kept
        (100, 0.350, None),
        (42, 0.075, 135),  # like the 63-107 ms samples seen at 1 MiB: ceil(42 * 0.2 / 0.075 * 1.2) = 135
        (10, 0.199, 13),  # just short: ceil(10 * 0.2 / 0.199 * 1.2) = 13
        (3, 0.0, 1000),  # an unmeasurable sample: capped, no division by zero
        (1000, 0.001, None),  # already at the cap: nothing more to do
        (999, 0.199, 1000),  # never past the cap
    ],
)
def test_calls_for_full_sample(calls, elapsed_s, expected):
    assert calls_for_full_sample(calls, elapsed_s, min_sample_s=0.2, max_calls=1000) == expected


def test_a_new_sample_always_has_more_calls():
    assert calls_for_full_sample(5, 0.1999999, min_sample_s=0.2, max_calls=1000) == 7  # ceil(6.0000003)
    assert calls_for_full_sample(1, 0.19, min_sample_s=0.2, max_calls=1000) == 2


class _Virtual:
    """Virtual time: each op advances it by its programmed duration; the clock reads it."""

    now = 0
    calls = 0


class _VirtualClock(CpuClock):
    resolution_s = 1e-9
    now_ns = staticmethod(lambda: _Virtual.now)


@pytest.fixture
def single_rank(tmp_path):
    import torch
    import torch.distributed as tdist

    from nccl_bench.ranks.dist import DistContext

    tdist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield DistContext(0, 1, 0, "gloo", torch.device("cpu"))
    finally:
        tdist.destroy_process_group()


def _op_slow_for_first(slow_calls: int, slow_ns: int, fast_ns: int):
    _Virtual.now, _Virtual.calls = 0, 0

    def op():
        _Virtual.now += slow_ns if _Virtual.calls < slow_calls else fast_ns
        _Virtual.calls += 1

    return op


def test_sample_shorter_than_the_floor_is_timed_again(single_rank):
    # Calibration (target 5% of 50 ms = 2.5 ms) sees 2 ms ops: blocks of 1 and 2 calls, so
    # 25 iters. The machine then runs them at 0.1 ms: a 2.5 ms sample, 20x short. Its own rate
    # asks for ceil(25 * 50 / 2.5 * 1.2) = 600 ops, a 60 ms sample, which is kept.
    plan = TimingPlan(warmup=0, iters=None, min_sample_s=0.05, trials=1, agg="max")
    runner = PointRunner(single_rank, plan, clock=_VirtualClock)
    measurement = runner.measure(_op_slow_for_first(3, 2_000_000, 100_000))
    assert measurement.iters == 600
    assert measurement.time_us == pytest.approx(100.0)
    assert measurement.shortest_sample_s == pytest.approx(0.06)
    assert len(measurement.per_op_us) == 600  # the short sample's per-op times are dropped
    assert _Virtual.calls == 3 + 25 + 600


def test_retries_are_bounded(single_rank):
    # Calibration sees 2 ms ops (25 iters); then every new sample runs 100x faster than the one
    # before (0.1 ms, 1 us, 10 ns), so no sample ever fills the floor. After the first sample and
    # MAX_SHORT_SAMPLE_RETRIES re-timings (600 calls, then 60,000) the runner keeps the last one.
    plan = TimingPlan(warmup=0, iters=None, min_sample_s=0.05, trials=1, agg="max")
    samples: list[int] = []  # calls of every timed block, calibration included

    class Counting(_VirtualClock):
        def start(self):
            samples.append(len(self._stamps) - 1)
            super().start()

    def op():
        timed = len(samples) - 2  # the first two blocks are calibration
        _Virtual.now += 2_000_000 if timed < 1 else 100_000 // 100 ** (timed - 1)

    _Virtual.now = 0
    measurement = PointRunner(single_rank, plan, clock=Counting).measure(op)
    assert samples == [1, 2, 25, 600, 60_000]
    assert len(samples) == 2 + 1 + MAX_SHORT_SAMPLE_RETRIES
    assert measurement.iters == 60_000 and measurement.time_us == pytest.approx(0.01)


def test_fixed_iters_are_never_changed(single_rank):
    plan = TimingPlan(warmup=0, iters=7, min_sample_s=0.05, trials=2, agg="max")
    runner = PointRunner(single_rank, plan, clock=_VirtualClock)
    measurement = runner.measure(_op_slow_for_first(0, 0, 100_000))
    assert measurement.iters == 7 and _Virtual.calls == 14
