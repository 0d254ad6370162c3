"""sweep --baseline: the options checked against each other, the plan against the baseline before
measuring, the finished run against the baseline read before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_bench import comparison as cmp
from nccl_bench.errors import UserInputError
from nccl_bench.option_types import flags_of
from nccl_bench.options import TOLERANCE
from nccl_bench.results.schema import RunRows
from nccl_bench.sweep import baseline_check
from nccl_bench.sweep.sweep_config import BaselineOptions, SweepConfig
from tests.helpers.rows import MiB, row


def plan_baseline_check(baseline, tolerance, *rest, **named):
    """As the sweep command checks them: --tolerance read by its option, a refusal said with the sweep's flags."""
    with flags_of(SweepConfig, BaselineOptions):
        return baseline_check.plan_baseline_check(baseline, None if tolerance is None else TOLERANCE.read(tolerance),
                                                  *rest, **named)


def test_plan_baseline_check_checks_the_options_against_each_other():
    run = Path("run")
    assert plan_baseline_check(None, None, None) is None
    assert plan_baseline_check(run, None, None) == baseline_check.BaselineCheck(run, 0.10, None)
    assert plan_baseline_check(run, "25%", "main") == baseline_check.BaselineCheck(run, 0.25, "main")
    assert plan_baseline_check(None, None, "main") == baseline_check.BaselineCheck(None, 0.10, "main")
    for args, option in (
        ((None, "10%", None), "--tolerance"),
        ((None, "10%", "main"), "--tolerance"),
        ((run, "10", None), "--tolerance"),
        ((None, None, "main", True), "--allow-mismatch"),
        ((run, None, None, False, True), "--replace-baseline"),
    ):
        with pytest.raises(UserInputError) as info:
            plan_baseline_check(*args)
        assert info.value.option == option


def test_plan_is_checked_against_the_baseline_before_measuring():
    # all_reduce in_place 1 MiB float, 2 gloo ranks
    check = plan_baseline_check(Path("run"), None, None).with_rows([row()])
    key = ("all_reduce", MiB, "float", "sum", "in_place")
    baseline_check.check_plan_against_baseline(check, 2, "gloo", {key})
    differs = "world size differs: the baseline has 2, this sweep would run with 3; pass --allow-mismatch"
    with pytest.raises(UserInputError, match=differs), flags_of(SweepConfig, BaselineOptions):
        baseline_check.check_plan_against_baseline(check, 3, "gloo", {key})
    with pytest.raises(UserInputError, match="backend differs: the baseline has gloo, this sweep would run with nccl"):
        baseline_check.check_plan_against_baseline(check, 2, "nccl", {key})
    with pytest.raises(UserInputError, match="shares no"):
        other = {("all_reduce", 2 * MiB, "float", "sum", "in_place")}
        baseline_check.check_plan_against_baseline(check, 2, "gloo", other)
    lenient = plan_baseline_check(Path("run"), None, None, allow_mismatch=True).with_rows([row()])
    baseline_check.check_plan_against_baseline(lenient, 3, "nccl", {key})


def test_after_a_sweep_the_run_is_judged_against_the_baseline_read_before_it():
    check = plan_baseline_check(Path("base"), "5%", None).with_rows([row()])
    comparison = baseline_check.check_against_baseline(check, RunRows(Path("out"), "run", (row(time_us=110.0),)))
    assert comparison.baseline_label == "--baseline base" and comparison.current_label == "run out"
    assert comparison.tolerance == 0.05 and comparison.rows[0].verdict == cmp.VERDICT_REGRESSION
