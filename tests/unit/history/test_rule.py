"""The regression rule over plain numbers: the band, the walk, steps, drift, accepted levels."""

from __future__ import annotations

import math
import random

import pytest

from nccl_bench.history import rule

FLOOR = 0.03


def _points(*values: float, noise: float | None = None, accepted: dict[int, str] | None = None) -> list[rule.Point]:
    accepted = accepted or {}
    return [rule.Point(f"run{i}", f"2026-01-{i + 1:02d}", v, noise, accepted.get(i)) for i, v in enumerate(values)]


def _statuses(values, window=20, floor=FLOOR, **kwargs) -> list[str]:
    return [v.status for v in rule.walk(_points(*values, **kwargs), window, floor)]


def test_t_quantile_widens_for_few_runs_and_tends_to_the_normal_one():
    assert rule.t_quantile(4.0, 5) == pytest.approx(9.97, abs=0.01)
    assert rule.t_quantile(4.0, 19) == pytest.approx(5.07, abs=0.01)
    assert rule.t_quantile(4.0, 1e9) == pytest.approx(4.0)
    assert rule.t_quantile(4.0, 0) == math.inf


def test_the_spread_comes_from_successive_differences():
    # |differences| of ln values 0.01 each: sigma = 1.4826 x 0.01 / sqrt(2); a drift of 3% per run adds
    # its slope to every difference, never the whole slide
    ys = [0.0, 0.01, 0.0, 0.01, 0.0]
    sigma, dof = rule.between_spread([ys])
    assert sigma == pytest.approx(1.4826 * 0.01 / math.sqrt(2))
    assert dof == 4 * rule.MAD_EFFICIENCY
    drift = [math.log(0.97 ** i) for i in range(20)]
    assert rule.between_spread([drift])[0] == pytest.approx(1.4826 * -math.log(0.97) / math.sqrt(2))


def test_the_floor_is_the_smallest_drop_on_a_quiet_series():
    assert rule.allowed_drop([[0.0] * 12], [], 12, floor=0.03, runs_seen=12) == pytest.approx(-math.log(0.97))


def test_the_smallest_drop_flagged_is_wider_while_the_series_is_young():
    # the floor x 12 / runs in log space: 11.5% at 3 runs, 8.7% at 4, 5.9% at 6, the floor from 12 on
    drops = {runs: 1 - math.exp(-rule.smallest_flagged(0.03, runs)) for runs in (3, 4, 6, 12, 40)}
    assert drops == pytest.approx({3: 0.1147, 4: 0.0873, 6: 0.0591, 12: 0.03, 40: 0.03}, abs=1e-4)


def test_a_young_quiet_series_does_not_flag_a_whole_run_slowed_by_load():
    # measured on a tc-shaped link under load: four runs within 0.4% and with their trials (0.55%), then one
    # run 5.6% slow with nothing changed; the band was -5.5% (docs/history.md)
    values = (0.01771, 0.01768, 0.01775, 0.01770, 0.01771 * 0.944)
    assert _statuses(values, noise=0.0055)[-1] == rule.OK
    # a 15% slower link is still flagged at the first run after the change
    assert _statuses((*values[:4], 0.01771 * 0.85), noise=0.0055)[-1] == rule.REGRESSION


def test_the_within_run_spread_sets_the_band_when_the_runs_agree_by_chance():
    # three identical runs whose trials spread by 2%: the spread is 2%, on 1 + 4 dof: t = 9.97
    assert rule.allowed_drop([[0.0, 0.0, 0.0]], [0.02] * 4, 3, 0.03, runs_seen=3) == pytest.approx(
        rule.t_quantile(4.0, 5) * 0.02 * math.sqrt(1 + math.pi / 6))


@pytest.mark.parametrize("values", [(10,), (10, 1), (10, 10, 1)])
def test_too_few_previous_runs_are_said_never_ok(values):
    verdict = rule.judge(_points(*values), window=20, floor=FLOOR)
    assert verdict.status == rule.TOO_FEW and verdict.threshold_gbps is None


def test_a_quiet_series_catches_a_ten_percent_drop_at_its_first_run():
    values = [10 * (1 + 0.003 * ((i * 7) % 5 - 2)) for i in range(8)]  # within +-0.6%
    verdict = rule.judge(_points(*values, 9.0, noise=0.005), window=20, floor=FLOOR)
    assert verdict.status == rule.REGRESSION and verdict.flagged_by == rule.DROP
    assert verdict.change == pytest.approx(-0.1, abs=0.01)
    assert verdict.step_runs == 1 and verdict.step_start.run_id == "run8"
    assert rule.judge(_points(*values, 9.8, noise=0.005), window=20, floor=FLOOR).status == rule.OK


def test_a_noisy_series_raises_nothing_from_its_noise():
    # a loaded 2-core host: back-to-back runs move by up to 2x, trials by 30%
    rng = random.Random(7)
    values = [rng.lognormvariate(0, 0.3) for _ in range(40)]
    assert rule.REGRESSION not in _statuses(values, noise=0.3)


def test_a_series_whose_band_holds_a_halving_is_too_noisy_to_judge_never_ok():
    # runs that wander by a factor of 2: a drop to half is inside their noise, so nothing they pass is "ok"
    rng = random.Random(7)
    values = [rng.lognormvariate(0, 0.5) for _ in range(12)]
    verdicts = rule.walk(_points(*values, 0.6), 20, FLOOR)
    assert verdicts[-1].status == rule.TOO_NOISY and not verdicts[-1].judged
    assert verdicts[-1].threshold_gbps <= verdicts[-1].median_gbps / 2
    assert rule.OK not in {v.status for v in verdicts[rule.MIN_PRIOR_RUNS:]} - {rule.REGRESSION}


def test_a_quiet_series_is_judged_not_too_noisy():
    values = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
    assert _statuses(values, noise=0.005)[-1] == rule.OK


def test_runs_whose_figure_is_zero_are_no_reference_and_never_crash():
    # a figure of 0 (a value with no time, as a store may hold) is left out of the reference
    assert _statuses([0.0, 0.0, 0.0, 0.0]) == [rule.TOO_FEW] * 4
    assert _statuses([1.0, 0.0, 1.01, 0.99, 1.0], noise=0.005)[-1] == rule.OK
    assert _statuses([1.0, 1.01, 0.99, 1.0, 0.0], noise=0.005)[-1] == rule.REGRESSION


def test_step_then_collapse_fails_from_the_step_on_and_names_where_it_started():
    values = (1, 1, 1, 1, 1, .5, .5, .5, .5, .5, 0.01)
    statuses = _statuses(values)
    assert statuses[:5] == [rule.TOO_FEW] * 3 + [rule.OK] * 2
    assert statuses[5:] == [rule.REGRESSION] * 6  # the step never becomes the new normal by itself
    verdict = rule.judge(_points(*values), 20, FLOOR)
    assert verdict.threshold_gbps > 0.9  # never below zero: the band is the level before the step
    assert (verdict.step_start.run_id, verdict.step_runs) == ("run5", 6)


def test_an_alternating_window_then_a_collapse_is_flagged():
    values = (1, 2) * 10 + (0.001,)
    statuses = _statuses(values)
    assert rule.REGRESSION not in statuses[:-1]
    assert statuses[-1] == rule.REGRESSION
    assert 0 < rule.judge(_points(*values), 20, FLOOR).threshold_gbps < 1


def test_a_drift_of_three_percent_per_run_is_flagged_and_keeps_failing():
    values = [0.97 ** i for i in range(20)]  # -44% in all, each run within 3% of the last
    statuses = _statuses(values)
    first = statuses.index(rule.REGRESSION)
    assert first < 19 and statuses[first:] == [rule.REGRESSION] * (20 - first)


def test_a_drift_under_noise_is_flagged_against_the_accepted_level():
    rng = random.Random(3)
    values = [0.97 ** i * rng.lognormvariate(0, 0.01) for i in range(20)]
    verdict = rule.judge(_points(*values), 20, FLOOR)
    assert verdict.status == rule.REGRESSION


def test_a_lasting_change_keeps_failing_past_half_the_window():
    values = (10,) * 10 + (7,) * 25
    statuses = _statuses(values, window=10)
    assert statuses[10:] == [rule.REGRESSION] * 25
    verdict = rule.judge(_points(*values), 10, FLOOR)
    assert verdict.median_gbps == pytest.approx(10) and verdict.step_runs == 25


def test_an_accepted_run_turns_the_series_green_and_becomes_its_level():
    values = (10,) * 6 + (7,) * 4
    assert _statuses(values)[-1] == rule.REGRESSION
    accepted = _statuses(values, accepted={6: "driver 550 is slower by design"})
    assert accepted[6] == rule.ACCEPTED and accepted[7:] == [rule.OK] * 3
    verdict = rule.judge(_points(*values, 6.0, accepted={6: "new driver"}), 20, FLOOR)
    # judged against the accepted level
    assert verdict.status == rule.REGRESSION and verdict.median_gbps == pytest.approx(7)


def test_the_latest_accepted_is_the_verdict_with_its_reason():
    verdict = rule.judge(_points(10, 10, 10, 10, 5, accepted={4: "why"}), 20, FLOOR)
    assert verdict.status == rule.ACCEPTED and verdict.latest.accepted == "why"


def test_an_anchor_older_than_the_points_read_keeps_a_slide_failing():
    # the newest runs alone look steady at 7; the series' first runs were at 10
    anchor = [rule.Point(f"old{i}", f"2025-01-{i + 1:02d}", 10.0) for i in range(5)]
    verdict = rule.judge(_points(*(7.0,) * 12), 20, FLOOR, anchor)
    assert verdict.status == rule.REGRESSION and verdict.flagged_by == rule.DRIFT
    assert verdict.anchor_gbps == pytest.approx(10.0)


def test_an_improvement_is_never_a_regression():
    assert rule.judge(_points(10, 10, 10, 30), window=20, floor=FLOOR).status == rule.OK


def test_the_window_bounds_the_reference():
    verdict = rule.judge(_points(*(10.0,) * 30, 10.0), window=5, floor=FLOOR)
    assert len(verdict.reference) == 5


@pytest.mark.parametrize("sigma", [0.01, 0.05, 0.3])
def test_false_alarms_stay_rare_on_normal_noise(sigma):
    """Over 300 series of 25 runs with a known within-run spread: at most one false alarm."""
    rng = random.Random(11)
    alarms = 0
    for _ in range(300):
        values = [rng.lognormvariate(0, sigma) for _ in range(25)]
        alarms += rule.REGRESSION in _statuses(values, noise=sigma)
    assert alarms <= 1


def test_rows_replayed_from_a_trace_join_no_series():
    from nccl_bench.history.records import series_values
    from tests.helpers.rows import row

    measured = row(busbw_gbps=10.0)
    replayed = row(busbw_gbps=1.0, source="trace:job.json")
    values = series_values([measured, replayed], "cpu@vm")
    assert [value.busbw_gbps for value in values] == [10.0]


@pytest.mark.parametrize("threshold,said", [(0.6, "only a drop of more than 40% would be flagged"),
                                            (0.004, "no drop short of the whole figure would be flagged")])
def test_a_too_noisy_line_never_names_a_drop_of_more_than_the_whole_figure(threshold, said):
    """A band within half a percent of 100% rounds to "more than 100%", a drop no run can show."""
    from nccl_bench.history.series import SeriesSummary
    from nccl_bench.render.history_text import too_noisy_text

    key = {"op": "all_gather", "placement": "out_of_place", "size_bytes": 1024, "dtype": "float32", "system": "gpu",
           "variant": "", "world_size": 1, "nodes": 1, "backend": "nccl"}
    points = _points(1.0, 0.5, 1.5, 1.0)
    verdict = rule.Verdict(rule.TOO_NOISY, points[-1], 1.0, threshold)
    line = too_noisy_text(SeriesSummary(key, 4, 0.5, 1.5, tuple(points), (verdict,)))
    assert said in line and "100%" not in line
