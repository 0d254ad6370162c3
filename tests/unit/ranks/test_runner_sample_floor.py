"""A first timed sample shorter than --min-sample-ms is extended: the rule, and the runner applying it.

The runner tests use a real single-rank gloo process group and a virtual clock, so the op
durations (and every expected count) are exact whatever the host's load.
"""

from __future__ import annotations

import pytest

from nccl_bench.ranks.clocks import CpuClock
from nccl_bench.ranks.runner import (
    MAX_AUTO_ITERS,
    MAX_SAMPLE_EXTENSIONS,
    PointRunner,
    TimingPlan,
    calls_to_fill_sample,
)


@pytest.mark.parametrize(
    ("calls", "elapsed_s", "expected"),
    [
        (100, 0.200, 0),  # lasted the floor: nothing to add
        (100, 0.350, 0),
        (42, 0.056, 130),  # the 56 ms 1 MiB sample seen end to end: ceil(42 * 0.144 / 0.056 * 1.2) = 130
        (40, 0.070, 90),  # ceil(40 * 0.13 / 0.07 * 1.2) = ceil(89.14) = 90
        (10, 0.199, 1),  # just short: always at least one more op
        (3, 0.0, 997),  # an unmeasurable sample: up to the cap, no division by zero
        (1000, 0.001, 0),  # already at the cap
        (990, 0.100, 10),  # never past the cap
    ],
)
def test_calls_to_fill_sample(calls, elapsed_s, expected):
    assert calls_to_fill_sample(calls, elapsed_s, min_sample_s=0.2, max_calls=1000) == expected


class _Virtual:
    """Virtual time: each op advances it by its programmed duration; the clock reads it."""

    now = 0
    calls = 0


class _VirtualClock(CpuClock):
    resolution_s = 1e-9
    now_ns = staticmethod(lambda: _Virtual.now)


def _op_slow_for_first(slow_calls: int, slow_ns: int, fast_ns: int):
    _Virtual.now, _Virtual.calls = 0, 0

    def op():
        _Virtual.now += slow_ns if _Virtual.calls < slow_calls else fast_ns
        _Virtual.calls += 1

    return op


def test_sample_shorter_than_the_floor_is_extended(single_rank):
    # Calibration (target 5% of 50 ms = 2.5 ms) sees 2 ms ops: blocks of 1 and 2 calls, so
    # 25 iters. The machine then runs them at 0.1 ms: a 2.5 ms sample, 20x short. Its own rate
    # asks for ceil(25 * 47.5 / 2.5 * 1.2) = 570 more ops; the 595-op sample lasts 59.5 ms.
    plan = TimingPlan(warmup=0, iters=None, min_sample_s=0.05, trials=1, agg="max")
    runner = PointRunner(single_rank, plan, clock=_VirtualClock)
    measurement = runner.measure(_op_slow_for_first(3, 2_000_000, 100_000))
    extra = calls_to_fill_sample(25, 2_500_000 * 1e-9, 0.05, MAX_AUTO_ITERS)
    assert extra in (570, 571)  # 570 up to float rounding of the virtual 2.5 ms
    assert measurement.iters == 25 + extra
    assert measurement.time_us == pytest.approx(100.0)
    assert measurement.shortest_sample_s == pytest.approx((25 + extra) * 1e-4)
    assert len(measurement.per_op_us) == 25 + extra  # both parts' per-op times, none twice
    assert _Virtual.calls == 3 + 25 + extra


def test_extensions_are_bounded(single_rank):
    # Calibration sees 2 ms ops (25 iters); then every new timed block runs 100x faster than the
    # one before (0.1 ms, 1 us, 10 ns), so the sample never fills the floor. After
    # MAX_SAMPLE_EXTENSIONS extensions the runner keeps what it has.
    plan = TimingPlan(warmup=0, iters=None, min_sample_s=0.05, trials=1, agg="max")
    blocks: list[int] = []  # calls of every timed block, calibration included

    class Counting(_VirtualClock):
        def start(self):
            blocks.append(len(self._stamps) - 1)
            super().start()

    def op():
        timed = len(blocks) - 2  # the first two blocks are calibration
        _Virtual.now += 2_000_000 if timed < 1 else 100_000 // 100 ** (timed - 1)

    _Virtual.now = 0
    measurement = PointRunner(single_rank, plan, clock=Counting).measure(op)
    assert blocks[:4] == [1, 2, 25, calls_to_fill_sample(25, 2_500_000 * 1e-9, 0.05, MAX_AUTO_ITERS)]
    assert len(blocks) == 2 + 1 + MAX_SAMPLE_EXTENSIONS
    assert measurement.iters == sum(blocks[2:])
    assert measurement.shortest_sample_s < 0.05  # kept, though short: the bound wins


def test_fixed_iters_are_never_changed(single_rank):
    plan = TimingPlan(warmup=0, iters=7, min_sample_s=0.05, trials=2, agg="max")
    runner = PointRunner(single_rank, plan, clock=_VirtualClock)
    measurement = runner.measure(_op_slow_for_first(0, 0, 100_000))
    assert measurement.iters == 7 and _Virtual.calls == 14
