"""Pure statistics: exact values (numpy.percentile's default 'linear' method for percentiles)."""

from __future__ import annotations

import math

import pytest

from nccl_bench.units import stats


def test_mean_is_exact_sum_over_count():
    assert stats.mean([1.0, 2.0, 4.0]) == pytest.approx(7 / 3, rel=0, abs=1e-15)
    assert stats.mean([0.1] * 10) == 0.1  # fsum: no accumulated rounding error


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([10.0, 20.0, 30.0, 40.0], 50, 25.0),  # even count: halfway between the middle two
        ([3.0, 1.0, 2.0], 50, 2.0),  # unsorted input
        ([10.0, 20.0, 30.0, 40.0], 0, 10.0),
        ([10.0, 20.0, 30.0, 40.0], 100, 40.0),
        ([10.0, 20.0, 30.0, 40.0], 25, 17.5),  # position 0.75 -> 10 + 0.75 * 10
        (list(range(1, 101)), 99, 99.01),  # position 98.01 -> 99 + 0.01 * 1
        ([7.0], 99, 7.0),
    ],
)
def test_percentile_matches_numpy_linear(values, q, expected):
    assert stats.percentile(values, q) == pytest.approx(expected, rel=1e-12)


def test_median_of_odd_and_even_counts():
    assert stats.median([5.0, 1.0, 3.0]) == 3.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5


@pytest.mark.parametrize("bad", [-1, 100.5])
def test_percentile_rejects_q_outside_0_100(bad):
    with pytest.raises(ValueError, match="0..100"):
        stats.percentile([1.0], bad)


def test_empty_inputs_are_errors_not_zero():
    with pytest.raises(ValueError):
        stats.mean([])
    with pytest.raises(ValueError):
        stats.percentile([], 50)
    with pytest.raises(ValueError):
        stats.combine_ranks([], "max")


def test_relative_spread_is_range_over_center():
    assert stats.relative_spread(90.0, 110.0, 100.0) == pytest.approx(0.2)
    assert stats.relative_spread(1.0, 1.0, 1.0) == 0.0
    assert stats.relative_spread(1.0, 2.0, 0.0) == math.inf


@pytest.mark.parametrize(
    ("per_op_s", "expected"),
    [
        (1e-5, 20_000),  # 0.2 s / 10 us
        (3e-3, 67),  # ceil(66.67): the sample lasts at least min_sample_s
        (0.1, 3),  # 2 ops would do, but never fewer than min_iters
        (1e-9, 100_000),  # capped
        (0.0, 100_000),  # an unmeasurably fast op gets the cap, not a division by zero
    ],
)
def test_iterations_for_sample(per_op_s, expected):
    assert stats.iterations_for_sample(per_op_s, 0.2, 3, 100_000) == expected


def test_iterations_for_sample_rejects_bad_bounds():
    with pytest.raises(ValueError):
        stats.iterations_for_sample(1e-3, 0.2, 0, 10)
    with pytest.raises(ValueError):
        stats.iterations_for_sample(1e-3, 0.2, 10, 5)


def test_combine_ranks_max_min_avg_and_defining_rank():
    assert stats.combine_ranks([3.0, 5.0, 4.0], "max") == (5.0, 1)
    assert stats.combine_ranks([3.0, 5.0, 4.0], "min") == (3.0, 0)
    assert stats.combine_ranks([3.0, 5.0, 4.0], "avg") == (4.0, 1)  # avg names the slowest rank
    with pytest.raises(ValueError, match="unknown aggregation"):
        stats.combine_ranks([1.0], "median")


def test_sweep_seconds_at_least_from_counts():
    # fixed iters: 10 point(s) x (5 warmup + 3 trials x 100 iters) ops, each >= 5 us
    assert stats.sweep_seconds_at_least(10, 5, 100, 3, 0.2, 5e-6) == pytest.approx(10 * 305 * 5e-6)
    # calibrated iters: every sample lasts >= min_sample_s
    assert stats.sweep_seconds_at_least(4096, 5, None, 1000, 0.2, 5e-6) == pytest.approx(4096 * (25e-6 + 200.0))


def test_mad_is_the_median_distance_from_the_median_and_ignores_one_wild_value():
    assert stats.mad([1.0, 2.0, 3.0, 4.0, 100.0]) == 1.0  # |1-3|, |2-3|, 0, |4-3|, 97 -> median 1
    assert stats.mad([5.0, 5.0, 5.0]) == 0.0
    assert stats.MAD_TO_SIGMA * stats.mad([1.0, 2.0, 3.0, 4.0, 100.0]) == pytest.approx(1.4826)
