"""The regression rule over plain numbers: exact thresholds, the floor, the spread, steps."""

from __future__ import annotations

import pytest

from nccl_bench.history import rule


def _points(*values: float) -> list[rule.Point]:
    return [rule.Point(f"run{i}", f"2026-01-{i + 1:02d}", v) for i, v in enumerate(values)]


def test_mad_sigma_is_the_scaled_median_absolute_deviation():
    # median 10; deviations 0, 1, 1, 2, 8 -> MAD 1
    assert rule.mad_sigma([10, 9, 11, 12, 2]) == pytest.approx(1.4826)


def test_threshold_takes_the_floor_when_the_history_is_quiet():
    assert rule.threshold([10, 10, 10], floor=0.3) == pytest.approx(7.0)


def test_threshold_takes_three_sigmas_when_the_history_is_noisy():
    # median 10, MAD 2 -> sigma 2.9652, 3 sigma 8.8956 > 0.3 x 10
    assert rule.threshold([8, 10, 12], floor=0.3) == pytest.approx(10 - 3 * 1.4826 * 2)


def test_a_run_within_the_spread_passes():
    verdict = rule.judge(_points(10, 10.5, 9.5, 7.5), window=20, floor=0.3)
    assert verdict.status == rule.OK
    assert verdict.threshold_gbps == pytest.approx(7.0)
    assert verdict.change == pytest.approx(-0.25)


def test_half_the_bandwidth_is_a_regression_of_that_run_alone():
    verdict = rule.judge(_points(10, 10.5, 9.5, 5), window=20, floor=0.3)
    assert verdict.status == rule.REGRESSION
    assert verdict.median_gbps == 10
    assert verdict.step_start == rule.Point("run3", "2026-01-04", 5)
    assert verdict.step_runs == 1


def test_a_lasting_drop_names_the_run_it_started_with():
    verdict = rule.judge(_points(10, 10, 10, 10, 10, 5, 5.2, 4.9), window=20, floor=0.3)
    assert verdict.status == rule.REGRESSION
    assert verdict.step_start.run_id == "run5"
    assert verdict.step_runs == 3


def test_a_noisy_history_does_not_flag_a_run_within_its_noise():
    # MAD 2 x 1.4826 x 3 = 8.9: a run at 4 is within the spread of 4..16
    assert rule.judge(_points(6, 10, 14, 8, 12, 4), window=20, floor=0.3).status == rule.OK


def test_the_window_forgets_older_runs():
    # the old level (100) is outside a window of 3: the latest is judged against 10, 10, 10
    values = (100, 100, 100, 100, 100, 10, 10, 10, 9)
    assert rule.judge(_points(*values), window=3, floor=0.3).status == rule.OK
    # within a window of 20 the median is still 100: the drop lasts since run5
    verdict = rule.judge(_points(*values), window=20, floor=0.3)
    assert (verdict.status, verdict.step_start.run_id, verdict.step_runs) == (rule.REGRESSION, "run5", 4)


@pytest.mark.parametrize("values", [(10,), (10, 1), (10, 10, 1)])
def test_too_few_previous_runs_judge_nothing(values):
    assert rule.judge(_points(*values), window=20, floor=0.3).status == rule.TOO_FEW


def test_an_improvement_is_never_a_regression():
    assert rule.judge(_points(10, 10, 10, 30), window=20, floor=0.3).status == rule.OK
