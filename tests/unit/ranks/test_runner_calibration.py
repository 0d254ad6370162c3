"""Calibration and noise flags of the timing runner: pure logic, no process group."""

from __future__ import annotations

import pytest

from nccl_bench.ranks.runner import (
    CALIBRATION_MAX_GROWTH,
    Measurement,
    next_calibration_calls,
)


@pytest.mark.parametrize(
    ("calls", "elapsed_s", "expected"),
    [
        (2, 0.020, None),  # the block lasted the target: done
        (2, 0.025, None),
        (1, 0.025, 2),  # one call may be one stall: one more block of two
        (1, 1e-5, CALIBRATION_MAX_GROWTH),  # rate says 2400 calls; growth is capped
        (10, 0.015, 20),  # rate says ceil(10 * 0.02 / 0.015 * 1.2) = 16; but at least double
        (100, 0.004, 600),  # rate says 600, within the cap
        (1, 0.0, CALIBRATION_MAX_GROWTH),  # an unmeasurable block still grows, no division by zero
    ],
)
def test_next_calibration_calls(calls, elapsed_s, expected):
    assert next_calibration_calls(calls, elapsed_s, target_s=0.020, max_calls=100_000) == expected


def test_calibration_never_exceeds_max_calls_and_stops_there():
    assert next_calibration_calls(60_000, 0.001, target_s=0.020, max_calls=100_000) == 100_000
    assert next_calibration_calls(100_000, 0.001, target_s=0.020, max_calls=100_000) is None


def test_calibration_converges_on_a_steady_op():
    """A 37 us op: blocks of 1, 100, 649 calls; the last lasts >= 20 ms."""
    per_call_s, calls, blocks = 37e-6, 1, []
    while calls is not None:
        blocks.append(calls)
        calls = next_calibration_calls(calls, calls * per_call_s, target_s=0.020, max_calls=100_000)
    assert blocks == [1, 100, 649]
    assert blocks[-1] * per_call_s >= 0.020


def _measurement(means, shortest_s=0.2, resolution_s=1e-9):
    return Measurement(iters=100, sample_means_us=tuple(means), per_op_us=(1.0,), max_time_rank=0,
                       shortest_sample_s=shortest_s, timer_resolution_s=resolution_s)


def test_time_is_median_of_trial_means():
    assert _measurement([30.0, 10.0, 20.0]).time_us == 20.0


def test_noisy_when_trial_range_exceeds_ten_percent_of_median():
    assert _measurement([100.0, 105.0, 110.0]).flags() == []  # range 10 / median 105 < 10%
    assert _measurement([100.0, 105.0, 116.0]).flags() == ["noisy"]  # 16 / 105 > 10%
    assert _measurement([100.0]).flags() == []  # one trial has no spread to judge


def test_below_timer_resolution_when_sample_is_under_1000_ticks():
    assert _measurement([1.0], shortest_s=0.4e-3, resolution_s=0.5e-6).flags() == ["below_timer_resolution"]
    assert _measurement([1.0], shortest_s=0.5e-3, resolution_s=0.5e-6).flags() == []


def test_a_long_first_block_is_repeated_once_before_it_is_trusted():
    """A 20 ms first op (a host hiccup) alone would set 3 iters for a 40 us op; it is measured again."""
    gpu_long_call_s = 0.050 / 3  # 50 ms samples, 3 minimum iterations
    assert next_calibration_calls(
        1, 0.020, target_s=0.0025, max_calls=100_000, long_call_s=gpu_long_call_s, first=True
    ) == 1
    assert next_calibration_calls(1, 0.020, target_s=0.0025, max_calls=100_000, long_call_s=gpu_long_call_s) is None
    # the repeat of a genuinely slow op ends calibration; a fast repeat grows as usual
    assert next_calibration_calls(1, 40e-6, target_s=0.0025, max_calls=100_000) == 75  # ceil(2.5 ms / 40 us x 1.2)


def test_one_stalled_call_does_not_end_calibration():
    """A 12 ms stall on the first single call once set a 1K sample to 16 ops (6 ms, not 200)."""
    assert next_calibration_calls(1, 0.012, target_s=0.010, max_calls=100_000, long_call_s=0.2 / 3) == 2
    assert next_calibration_calls(2, 0.012, target_s=0.010, max_calls=100_000, long_call_s=0.2 / 3) is None
    # an op slower than a sample's share (200 ms / 3 minimum iterations) needs no second block
    assert next_calibration_calls(1, 0.070, target_s=0.010, max_calls=100_000, long_call_s=0.2 / 3) is None
