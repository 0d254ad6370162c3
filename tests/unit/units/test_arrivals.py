"""Arrivals: clocks aligned from barrier exits, the late-rank rule, nccl-tests' i_p99 and cv%; exact values."""

from __future__ import annotations

import pytest

from nccl_bench.units import arrivals
from nccl_bench.units.arrivals import LAST_SHARE, LATE_FLOOR_US, LATE_SIGMAS


def test_ranks_on_rank_0s_host_share_its_clock_exactly():
    readings = [[100.0, 200.0], [160.0, 240.0], [5_000.0, 5_100.0]]  # rank 1 left the barriers 60 and 40 ns later
    alignment = arrivals.align_clocks(readings, ["a", "a", "b"])
    assert alignment.offsets_ns[:2] == (0.0, 0.0) and alignment.errors_us[:2] == (0.0, 0.0)
    assert alignment.offsets_ns[2] == 4_900.0  # median of 4,900 and 4,900


def test_another_hosts_offset_is_the_median_and_its_error_the_robust_spread():
    rank0 = [0.0, 1_000.0, 2_000.0, 3_000.0, 4_000.0]
    # host b's clock runs 1 ms ahead; one exit was descheduled by 50 us, others stray by 2 us
    rank1 = [1_000_000.0, 1_001_002.0, 1_001_998.0, 1_053_000.0, 1_004_000.0]
    rank2 = [r + 7.0 for r in rank1]  # host b's second rank: its host's offset, whatever its own readings
    alignment = arrivals.align_clocks([rank0, rank1, rank2], ["a", "b", "b"])
    assert alignment.offsets_ns == (0.0, 1_000_000.0, 1_000_000.0)  # differences 1e6, +2, -2, +50000, 0
    assert alignment.errors_us[1] == pytest.approx(2.0 * 1.4826 / 1e3)  # MAD 2 ns, the 50 us exit ignored
    assert alignment.errors_us[2] == alignment.errors_us[1]


def test_arrival_offset_is_the_median_lateness():
    lateness = arrivals.lateness_us([1_000.0, 2_000.0, 9_000.0], [0.0, 1_500.0, 3_000.0])
    assert lateness == [1.0, 0.5, 6.0]
    assert arrivals.arrival_offset_us(lateness) == 1.0  # the 6 us op (a scheduler hiccup) moves nothing
    assert arrivals.arrival_offset_us([]) is None


def test_a_rank_far_behind_a_quiet_group_is_late():
    assert arrivals.late_in_sample([0.0, 3.0, 350.0, 5.0], [0.0] * 4) == (2, 347.0)


def test_a_lateness_under_the_floor_is_not_named():
    just_under = LATE_FLOOR_US - 1
    assert arrivals.late_in_sample([0.0, 0.0, just_under, 0.0], [0.0] * 4) is None
    assert arrivals.late_in_sample([0.0, 0.0, LATE_FLOOR_US + 1, 0.0], [0.0] * 4) == (2, LATE_FLOOR_US + 1)


def test_a_lateness_within_the_others_spread_is_not_named():
    # others 0, 100, 400: median 100, MAD 100, so late only beyond 100 + 5 x 148.26 = 841.3
    others = [0.0, 100.0, 400.0]
    assert arrivals.late_in_sample([*others, 800.0], [0.0] * 4) is None
    assert arrivals.late_in_sample([*others, 100.0 + LATE_SIGMAS * 148.26 + 1], [0.0] * 4) is not None


def test_clock_errors_widen_the_threshold():
    # 150 us behind: late on one host's clock, not when either side's offset may be 30 us off
    assert arrivals.late_in_sample([0.0, 0.0, 150.0], [0.0, 0.0, 0.0]) == (2, 150.0)
    assert arrivals.late_in_sample([0.0, 0.0, 150.0], [30.0, 0.0, 30.0]) is None


def test_one_rank_or_none_has_no_late_rank():
    assert arrivals.late_in_sample([500.0], [0.0]) is None


def test_the_late_rank_is_the_one_late_in_every_sample():
    late_2 = [0.0, 1.0, 400.0, 2.0]
    late_1 = [0.0, 500.0, 3.0, 2.0]
    quiet = [0.0, 1.0, 2.0, 3.0]
    found = arrivals.late_rank([late_2, [0.0, 2.0, 500.0, 1.0], late_2], [0.0] * 4)
    assert found == arrivals.Late(rank=2, excess_us=399.0, samples=3)  # median of 399, 499, 399
    assert arrivals.late_rank([late_2, late_2, late_1], [0.0] * 4) is None  # two of three: not every one
    assert arrivals.late_rank([late_2, quiet], [0.0] * 4) is None
    assert arrivals.late_rank([quiet], [0.0] * 4) is None
    assert arrivals.late_rank([], [0.0] * 4) is None
    assert arrivals.late_rank([late_2], [0.0] * 4).rank == 2  # one trial: its one sample decides


def test_a_rank_late_by_median_but_not_last_at_most_ops_is_not_named():
    """The scheduler's victim: behind by its median lateness, yet not the last caller at most ops."""
    late_2 = [0.0, 1.0, 400.0, 2.0]
    held_back = [0.1, 0.2, LAST_SHARE - 0.01, 0.3]
    consistent = [0.0, 0.0, LAST_SHARE, 0.0]
    assert arrivals.late_in_sample(late_2, [0.0] * 4, held_back) is None
    assert arrivals.late_in_sample(late_2, [0.0] * 4, consistent) == (2, 399.0)
    assert arrivals.late_rank([late_2, late_2], [0.0] * 4, [consistent, held_back]) is None
    assert arrivals.late_rank([late_2, late_2], [0.0] * 4, [consistent, consistent]).rank == 2


def test_a_rank_behind_without_its_own_time_outside_the_op_is_not_named():
    """Behind, yet calling each op as soon as it returned: late from the op before, not of its own doing."""
    late_2 = [0.0, 1.0, 400.0, 2.0]
    loop_only = [12.0, 11.0, 14.0, 13.0]
    slept = [12.0, 11.0, 12.0 + LATE_FLOOR_US + 1, 13.0]
    assert arrivals.late_in_sample(late_2, [0.0] * 4, gaps_us=loop_only) is None
    assert arrivals.late_in_sample(late_2, [0.0] * 4, gaps_us=slept) == (2, LATE_FLOOR_US + 1)
    # a pair: the other rank's gap is the only reference, the floor the margin
    assert arrivals.late_in_sample([0.0, 147.0], [0.0] * 2, [0.06, 0.94], [15.0, 16.0]) is None
    # a gap not known for every rank (GPU): the offset alone decides
    assert arrivals.late_in_sample(late_2, [0.0] * 4, gaps_us=[None] * 4) == (2, 399.0)
    assert arrivals.late_rank([late_2, late_2], [0.0] * 4, gaps_us=[slept, loop_only]) is None
    assert arrivals.late_rank([late_2, late_2], [0.0] * 4, gaps_us=[slept, slept]).rank == 2


def test_with_gaps_known_the_gap_decides_and_says_how_late():
    """Four ranks on two cores or four hosts: the others' offsets scatter (5 sigmas = 666 us) and clock
    errors across hosts reach hundreds of microseconds, while every rank's gap, on its own clock, stays at
    the loop's few microseconds but the one that slept 400 us before each op."""
    scattered = [135.9, 264.0, 633.0, 46.0]
    gaps = [4.5, 4.4, 404.3, 3.8]
    errors = [0.0, 404.8, 205.3, 280.3]
    assert arrivals.late_in_sample(scattered, [0.0] * 4) is None  # the offset alone: within the others' noise
    assert arrivals.late_in_sample(scattered, errors, gaps_us=gaps) == (2, pytest.approx(404.3 - 4.4))
    assert arrivals.late_in_sample(scattered, errors, gaps_us=[4.5, 4.4, 4.4 + LATE_FLOOR_US, 3.8]) is None


def test_nearest_rank_percentile_as_nccl_tests_computes_it():
    values = list(range(1, 101))  # 1..100: index ceil(100*99/100)-1 = 98 -> 99
    assert arrivals.nearest_rank_percentile(values, 99) == 99
    assert arrivals.nearest_rank_percentile([5.0, 1.0, 3.0], 99) == 5.0  # under 100 values: the maximum
    assert arrivals.nearest_rank_percentile([2.0, 4.0, 6.0, 8.0], 50) == 4.0  # index ceil(2)-1 = 1
    with pytest.raises(ValueError):
        arrivals.nearest_rank_percentile([], 99)


def test_cv_is_the_population_deviation_over_the_mean_in_percent():
    assert arrivals.cv_pct([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(40.0)  # sd 2 (over n), mean 5
    assert arrivals.cv_pct([3.0, 3.0]) == 0.0
    assert arrivals.cv_pct([]) is None and arrivals.cv_pct([0.0, 0.0]) is None


def test_the_process_with_the_least_time_in_the_op_is_the_late_one():
    # process 1 spends 300 us less than the others at every iteration: they waited for it
    times = [[330.0, 331.0, 329.0], [30.0, 31.0, 29.0], [329.0, 330.0, 331.0]]
    late = arrivals.late_from_durations(times)
    assert (late.rank, late.excess_us, late.samples) == (1, 299.5, 1)


def test_a_process_lowest_at_too_few_iterations_is_not_named():
    # process 1 is far below at 8 of 10 iterations: under LAST_SHARE, its median lateness alone names nothing
    low = [30.0] * 8 + [400.0] * 2
    times = [[330.0] * 10, low, [331.0] * 10]
    assert arrivals.late_from_durations(times) is None


def test_equal_durations_or_one_process_name_nobody():
    assert arrivals.late_from_durations([[30.0, 31.0], [30.5, 30.0], [31.0, 30.5]]) is None
    assert arrivals.late_from_durations([[30.0, 31.0]]) is None
    assert arrivals.late_from_durations([[], []]) is None
