"""Verdict logic of nccl_bench.comparison over synthetic rows, with exact expectations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from nccl_bench import comparison as cmp
from nccl_bench.errors import UserInputError
from nccl_bench.options import TOLERANCE
from nccl_bench.results.schema import STATUS_UNSUPPORTED, STATUS_WRONG, RunRows
from tests.helpers.rows import MiB, row


def only(comparison: cmp.Comparison) -> cmp.RowComparison:
    assert len(comparison.rows) == 1
    return comparison.rows[0]


@pytest.mark.parametrize(
    "text, expected",
    [("10%", 0.10), ("0.1", 0.1), (" 5 % ", 0.05), ("0", 0.0), ("2.5%", 0.025), (".25", 0.25), ("0%", 0.0)],
)
def test_a_tolerance_accepts_percent_and_fraction(text, expected):
    assert TOLERANCE.read(text) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("text", ["10", "1", "100%", "-5%", "ten", "", "10%%", "0.1.2"])
def test_a_tolerance_rejects_ambiguous_or_bad_values_naming_the_option(text):
    with pytest.raises(UserInputError) as info:
        TOLERANCE.read(text)
    assert info.value.option == "--tolerance"


def test_busbw_drop_beyond_tolerance_is_a_regression_judged_on_busbw():
    # time 100 -> 125 us: busbw drops to 80% of baseline, i.e. -20%
    result = only(cmp.compare_rows([row(time_us=100.0)], [row(time_us=125.0)], tolerance=0.10))
    assert result.verdict == cmp.VERDICT_REGRESSION
    assert result.metric == cmp.METRIC_BUSBW
    assert result.delta_pct == pytest.approx(-20.0)
    assert result.failed
    assert "busbw" in result.reason and "-20.0%" in result.reason


def test_busbw_drop_within_tolerance_is_ok():
    # busbw ratio 100/110 = 0.909: a 9.09% drop, inside 10%
    result = only(cmp.compare_rows([row(time_us=100.0)], [row(time_us=110.0)], tolerance=0.10))
    assert result.verdict == cmp.VERDICT_OK
    assert result.delta_pct == pytest.approx(100 * (100 / 110 - 1))


def test_drop_exactly_at_tolerance_is_not_a_regression():
    base, cur = row(time_us=100.0), row(time_us=100.0)
    cur = dataclasses.replace(cur, busbw_gbps=base.busbw_gbps * 0.75)
    assert only(cmp.compare_rows([base], [cur], tolerance=0.25)).verdict == cmp.VERDICT_OK


def test_faster_beyond_tolerance_is_reported_but_never_fails():
    comparison = cmp.compare_rows([row(time_us=100.0)], [row(time_us=50.0)], tolerance=0.10)
    assert only(comparison).verdict == cmp.VERDICT_FASTER
    assert only(comparison).delta_pct == pytest.approx(100.0)
    assert comparison.exit_code == 0


def test_small_sizes_are_judged_on_time_rising():
    small = 1024
    result = only(
        cmp.compare_rows([row(size_bytes=small, time_us=10.0)], [row(size_bytes=small, time_us=11.5)],
                         tolerance=0.10, min_bytes=64 * 1024)
    )
    assert result.metric == cmp.METRIC_TIME
    assert result.verdict == cmp.VERDICT_REGRESSION
    assert result.delta_pct == pytest.approx(15.0)
    assert (result.baseline_value, result.current_value) == (10.0, 11.5)


def test_min_bytes_boundary_size_is_judged_on_busbw():
    result = only(cmp.compare_rows([row(size_bytes=65536)], [row(size_bytes=65536)], min_bytes=65536))
    assert result.metric == cmp.METRIC_BUSBW


def test_ops_without_bandwidth_fall_back_to_time():
    base = row(op="barrier", time_us=20.0, busbw_gbps=None, algbw_gbps=None)
    cur = row(op="barrier", time_us=30.0, busbw_gbps=None, algbw_gbps=None)
    result = only(cmp.compare_rows([base], [cur]))
    assert result.metric == cmp.METRIC_TIME
    assert result.verdict == cmp.VERDICT_REGRESSION


def test_with_trials_overlapping_ranges_make_a_big_drop_noisy_not_failing():
    # medians 100 vs 130 us (busbw -23%) but ranges [60, 140] and [90, 170] overlap
    base, cur = row(time_us=100.0, trials=5, spread=40.0), row(time_us=130.0, trials=5, spread=40.0)
    comparison = cmp.compare_rows([base], [cur], tolerance=0.10)
    assert only(comparison).verdict == cmp.VERDICT_NOISY
    assert only(comparison).ranges_overlap is True
    assert comparison.exit_code == 0


def test_with_trials_disjoint_ranges_and_big_drop_fail():
    base, cur = row(time_us=100.0, trials=5, spread=5.0), row(time_us=130.0, trials=5, spread=5.0)
    result = only(cmp.compare_rows([base], [cur], tolerance=0.10))
    assert result.verdict == cmp.VERDICT_REGRESSION
    assert result.ranges_overlap is False
    assert "do not overlap" in result.reason


def test_with_trials_disjoint_ranges_but_small_drop_pass():
    base, cur = row(time_us=100.0, trials=5, spread=1.0), row(time_us=105.0, trials=5, spread=1.0)
    assert only(cmp.compare_rows([base], [cur], tolerance=0.10)).verdict == cmp.VERDICT_OK


def test_trials_rule_needs_both_runs_to_have_trials():
    base, cur = row(time_us=100.0, trials=5, spread=40.0), row(time_us=130.0, trials=1)
    result = only(cmp.compare_rows([base], [cur], tolerance=0.10))
    assert result.ranges_overlap is None
    assert result.verdict == cmp.VERDICT_REGRESSION


def test_trial_ranges_touching_count_as_overlap():
    base, cur = row(time_us=100.0, trials=3, spread=10.0), row(time_us=120.0, trials=3, spread=10.0)
    assert cmp.trial_ranges_overlap(base, cur) is True


def test_unsupported_rows_are_listed_not_judged():
    base, cur = row(), row(status=STATUS_UNSUPPORTED, time_us=None)
    comparison = cmp.compare_rows([base, row(size_bytes=2 * MiB)], [cur, row(size_bytes=2 * MiB)])
    assert [r.verdict for r in comparison.rows] == [cmp.VERDICT_UNSUPPORTED, cmp.VERDICT_OK]
    assert comparison.rows[0].metric is None
    assert comparison.exit_code == 0


def test_current_failing_its_data_check_fails_whatever_the_speed():
    result = only(cmp.compare_rows([row()], [row(status=STATUS_WRONG, wrong=7)]))
    assert result.verdict == cmp.VERDICT_WRONG
    assert result.failed
    assert "7 wrong elements" in result.reason


def test_missing_rows_on_either_side_are_listed_in_order():
    base = [row(size_bytes=MiB), row(size_bytes=2 * MiB)]
    cur = [row(size_bytes=MiB), row(size_bytes=4 * MiB)]
    comparison = cmp.compare_rows(base, cur)
    assert [(r.key.size_bytes, r.verdict) for r in comparison.rows] == [
        (MiB, cmp.VERDICT_OK),
        (2 * MiB, cmp.VERDICT_ONLY_BASELINE),
        (4 * MiB, cmp.VERDICT_ONLY_CURRENT),
    ]
    assert comparison.exit_code == 0
    assert comparison.counts() == {cmp.VERDICT_OK: 1, cmp.VERDICT_ONLY_BASELINE: 1, cmp.VERDICT_ONLY_CURRENT: 1}


def test_rows_match_on_every_key_column():
    base = [row(dtype="float"), row(dtype="half"), row(redop="max"), row(placement="out_of_place")]
    cur = [row(dtype="half", time_us=200.0)]
    comparison = cmp.compare_rows(base, cur)
    judged = [r for r in comparison.rows if r.current is not None]
    assert len(judged) == 1 and judged[0].key.dtype == "half"
    assert judged[0].verdict == cmp.VERDICT_REGRESSION


def test_world_size_mismatch_is_an_input_error_unless_allowed():
    base, cur = [row(world_size=2)], [row(world_size=4)]
    with pytest.raises(UserInputError) as info:
        cmp.compare_rows(base, cur)
    assert "world size" in info.value.problem and "--allow-mismatch" in info.value.problem
    comparison = cmp.compare_rows(base, cur, allow_mismatch=True)
    # busbw is normalised for rank count, so the rows are matched across world sizes
    assert only(comparison).verdict == cmp.VERDICT_OK
    assert only(comparison).key.world_size is None
    assert comparison.notes and "world size differs" in comparison.notes[0]


def test_backend_mismatch_is_an_input_error_unless_allowed():
    base, cur = [row(backend="nccl")], [row(backend="gloo")]
    with pytest.raises(UserInputError, match="backend differs"):
        cmp.compare_rows(base, cur)
    assert only(cmp.compare_rows(base, cur, allow_mismatch=True)).verdict == cmp.VERDICT_OK


def test_nothing_in_common_is_an_input_error():
    with pytest.raises(UserInputError, match="shares no"):
        cmp.compare_rows([row(op="all_reduce")], [row(op="broadcast")])


def test_empty_side_is_an_input_error():
    with pytest.raises(UserInputError, match="no result rows"):
        cmp.compare_rows([], [row()])


def test_duplicate_keys_are_an_input_error():
    with pytest.raises(UserInputError, match="two rows"):
        cmp.compare_rows([row(), row()], [row()])


def test_summary_line_counts_and_states_the_rule():
    comparison = cmp.compare_rows(
        [row(size_bytes=MiB), row(size_bytes=2 * MiB)],
        [row(size_bytes=MiB, time_us=150.0), row(size_bytes=2 * MiB)],
        tolerance=0.05,
    )
    assert comparison.exit_code == 1
    assert comparison.summary() == (
        "REGRESSION: 2 rows compared (1 regression, 1 ok); tolerance 5%, latency-judged below 64K"
    )


def test_runs_are_named_by_argument_in_messages_and_by_path_in_reports():
    base = RunRows(Path("a"), "BASELINE", (row(),))
    comparison = cmp.compare_runs(base, RunRows(Path("b"), "CURRENT", (row(time_us=150.0),)))
    assert (comparison.baseline_label, comparison.current_label) == ("BASELINE a", "CURRENT b")
    assert (comparison.baseline_path, comparison.current_path) == ("a", "b")
    assert comparison.exit_code == 1
    with pytest.raises(UserInputError) as info:
        cmp.compare_runs(base, RunRows(Path("b"), "CURRENT", ()))
    assert str(info.value).startswith("CURRENT b")


def test_one_rank_runs_are_judged_on_time_since_their_busbw_is_zero_by_definition():
    def one_rank(time_us):
        return row(size_bytes=MiB, time_us=time_us, busbw=0.0, algbw_gbps=MiB / time_us / 1e3, busbw_factor=0.0,
                   world_size=1)

    result = cmp.compare_rows([one_rank(100.0)], [one_rank(200.0)], tolerance=0.10)
    assert (only(result).verdict, only(result).metric) == (cmp.VERDICT_REGRESSION, cmp.METRIC_TIME)
    same = cmp.compare_rows([one_rank(100.0)], [one_rank(101.0)], tolerance=0.10)
    assert (only(same).verdict, same.judged, same.exit_code) == (cmp.VERDICT_OK, 1, 0)


def test_a_comparison_that_judged_no_row_does_not_pass():
    """Every row listed but none judged (no data, unsupported): exit 2, the summary says so, JUnit has an error."""
    from nccl_bench.render.compare_exports import to_junit_xml

    result = cmp.compare_rows([row(time_us=None, busbw=None)], [row(time_us=None, busbw=None)])
    assert only(result).verdict == cmp.VERDICT_NO_DATA
    assert result.judged == 0 and result.exit_code == 2
    assert result.summary().startswith("NOTHING JUDGED: 1 rows compared (1 no data)")
    junit = to_junit_xml(result)
    assert 'errors="1"' in junit and 'type="not_judged"' in junit and 'failures="0"' in junit
