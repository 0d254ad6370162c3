"""Runs read as `compare` reads them, and baselines stored and checked on disk."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from nccl_bench import comparison as cmp
from nccl_bench.errors import UserInputError
from nccl_bench.option_types import flags_of
from nccl_bench.options import TOLERANCE
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.loader import load_rows, read_run
from nccl_bench.sweep import baseline_check
from nccl_bench.sweep.saved_baselines import prepare_baselines
from nccl_bench.sweep.saved_baselines import save_baseline as save_baseline_by_key
from nccl_bench.sweep.sweep_config import BaselineOptions, SweepConfig
from tests.helpers.races import race
from tests.helpers.rows import MiB, row, write_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def compare_paths(baseline: Path, current: Path, **rule) -> cmp.Comparison:
    """What `compare BASELINE CURRENT` does: read both runs, then judge them."""
    return cmp.compare_runs(read_run(baseline, "BASELINE"), read_run(current, "CURRENT"), **rule)


def plan(baseline, tolerance, save_name, allow_mismatch=False, replace_baseline=False, results_root=None):
    """What `sweep --baseline/--save-baseline` does before measuring: the options read and checked against
    each other, then the files they name; a refusal said with the sweep's flags."""
    with flags_of(SweepConfig, BaselineOptions):
        tolerance = None if tolerance is None else TOLERANCE.read(tolerance)
        check = baseline_check.plan_baseline_check(baseline, tolerance, save_name, allow_mismatch, replace_baseline)
        if check is None:
            return None
        return check.with_rows(prepare_baselines(check.baseline, save_name, results_root, replace_baseline))


def save_baseline(*args, **kwargs):
    """--save-baseline after the sweep: a refusal said with the sweep's flags."""
    with flags_of(SweepConfig, BaselineOptions):
        return save_baseline_by_key(*args, **kwargs)


def test_compare_reads_results_written_by_the_writer(tmp_path):
    for name, time_us in (("base", 100.0), ("cur", 140.0)):
        write_run(tmp_path / name, [row(time_us=time_us, trials=3, spread=2.0), row(size_bytes=1024, time_us=10.0)])
    comparison = compare_paths(tmp_path / "base", tmp_path / "cur" / "results.csv")
    assert [r.verdict for r in comparison.rows] == [cmp.VERDICT_REGRESSION, cmp.VERDICT_OK]
    assert comparison.rows[0].ranges_overlap is False


def test_compare_reads_nccl_tests_logs_and_json_as_report_does():
    log = FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"
    assert compare_paths(log, log).counts() == {cmp.VERDICT_OK: 8}
    # the -J JSON holds the log's first two sizes, with unrounded bandwidths
    comparison = compare_paths(log, FIXTURES / "constructed_v3_all_reduce_perf.json")
    assert comparison.counts() == {cmp.VERDICT_OK: 4, cmp.VERDICT_ONLY_BASELINE: 4}
    assert {r.current.backend for r in comparison.rows if r.current} == {"nccl"}


def test_nccl_tests_log_against_a_gloo_run_needs_allow_mismatch(tmp_path):
    log = FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"
    run = write_run(tmp_path / "gloo", [dataclasses.replace(theirs, backend="gloo") for theirs in load_rows(log)])
    with pytest.raises(UserInputError, match="backend differs: .* has nccl, .* has gloo; pass --allow-mismatch"):
        compare_paths(log, run)
    comparison = compare_paths(log, run, allow_mismatch=True)
    assert comparison.counts() == {cmp.VERDICT_OK: 8}
    assert len(comparison.notes) == 1


def test_read_run_names_the_input_and_explains_a_foreign_csv(tmp_path):
    run = read_run(write_run(tmp_path / "run", [row()]), "--baseline")
    assert (run.path, run.option, run.rows) == (tmp_path / "run", "--baseline", (row(),))
    assert run.label == f"--baseline {tmp_path / 'run'}"
    foreign = tmp_path / "other.csv"
    foreign.write_text("a,b\n1,2\n")
    with pytest.raises(UserInputError) as info:
        read_run(foreign, "CURRENT")
    assert info.value.option == "CURRENT"


def test_save_baseline_copies_and_replaces(tmp_path):
    run = write_run(tmp_path / "run", [row()])
    (run / "meta.json").write_text("{}")
    target = save_baseline(run, "main", tmp_path / "results")
    assert target == tmp_path / "results" / "baselines" / "main"
    assert read_rows(target) == [row()]
    assert (target / "meta.json").is_file()
    # a second save is refused unless asked to replace, then replaces and leaves no staging folders
    write_run(run, [row(size_bytes=2 * MiB)])
    with pytest.raises(UserInputError, match="already exists.*--replace-baseline"):
        save_baseline(run, "main", tmp_path / "results")
    assert len(read_rows(target)) == 1
    save_baseline(run, "main", tmp_path / "results", replace=True)
    assert len(read_rows(target)) == 2
    assert sorted(p.name for p in target.parent.iterdir()) == ["main"]


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".", "-x"])
def test_save_baseline_rejects_path_like_names(tmp_path, name):
    with pytest.raises(UserInputError) as info:
        save_baseline(tmp_path, name, tmp_path / "results")
    assert info.value.option == "--save-baseline"


def test_save_baseline_refuses_a_folder_without_results(tmp_path):
    with pytest.raises(UserInputError, match="no results found"):
        save_baseline(tmp_path, "main", tmp_path / "results")


def test_baseline_check_validates_before_measuring(tmp_path):
    run = write_run(tmp_path / "run", [row()])
    assert plan(None, None, None) is None
    assert plan(run, None, None) == baseline_check.BaselineCheck(run, 0.10, None)
    assert plan(run, None, None).baseline_rows == (row(),)
    assert plan(run, "25%", "main") == baseline_check.BaselineCheck(run, 0.25, "main")
    assert plan(None, None, "main") == baseline_check.BaselineCheck(None, 0.10, "main")
    log = FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"  # read as `compare` reads it
    assert plan(log, None, None) == baseline_check.BaselineCheck(log, 0.10, None)
    for args, option in (
        ((None, "10%", None), "--tolerance"),
        ((None, "10%", "main"), "--tolerance"),
        ((tmp_path / "missing", None, None), "--baseline"),
        ((run, "10", None), "--tolerance"),
        ((run, None, "../up"), "--save-baseline"),
        ((None, None, "main", True), "--allow-mismatch"),
        ((run, None, None, False, True), "--replace-baseline"),
    ):
        with pytest.raises(UserInputError) as info:
            plan(*args)
        assert info.value.option == option


def test_baseline_check_refuses_an_existing_baseline_unless_replacing(tmp_path):
    run = write_run(tmp_path / "run", [row()])
    save_baseline(run, "main", tmp_path / "results")
    with pytest.raises(UserInputError, match="'main' already exists .*; pass --replace-baseline") as info:
        plan(None, None, "main", results_root=tmp_path / "results")
    assert info.value.option == "--save-baseline"
    check = plan(None, None, "main", replace_baseline=True, results_root=tmp_path / "results")
    assert check.replace_baseline


def test_plan_read_from_disk_is_checked_against_the_baseline(tmp_path):
    run = write_run(tmp_path / "run", [row()])  # all_reduce in_place 1 MiB float, 2 gloo ranks
    check = plan(run, None, None)
    key = ("all_reduce", MiB, "float", "sum", "in_place")
    baseline_check.check_plan_against_baseline(check, 2, "gloo", {key})
    with pytest.raises(UserInputError, match="world size differs: the baseline has 2, this sweep would run with 3"):
        with flags_of(SweepConfig, BaselineOptions):
            baseline_check.check_plan_against_baseline(check, 3, "gloo", {key})
    lenient = plan(run, None, None, allow_mismatch=True)
    baseline_check.check_plan_against_baseline(lenient, 3, "nccl", {key})


def _save_at_once(tmp_path, monkeypatch, replace: bool) -> list:
    """Six runs save one name at the same moment, each having found it free (or replacing it)."""
    import threading

    from nccl_bench.sweep import saved_baselines

    racers = 6
    runs = [write_run(tmp_path / f"run{i}", [row(size_bytes=(i + 1) * MiB)]) for i in range(racers)]
    barrier = threading.Barrier(racers)
    monkeypatch.setattr(saved_baselines, "refuse_existing_baseline", lambda root, name: barrier.wait())
    outcomes = race(racers, lambda i: save_baseline(runs[i], "main", tmp_path / "results", replace=replace))
    saved = read_rows(tmp_path / "results" / "baselines" / "main")
    assert len(saved) == 1 and saved[0].size_bytes in {(i + 1) * MiB for i in range(racers)}  # one run, whole
    assert [p.name for p in (tmp_path / "results" / "baselines").iterdir()] == ["main"]  # nothing left beside it
    return outcomes


def test_of_saves_of_one_new_name_at_once_one_is_kept_and_the_others_refused(tmp_path, monkeypatch):
    outcomes = _save_at_once(tmp_path, monkeypatch, replace=False)
    refused = [o for o in outcomes if isinstance(o, UserInputError)]
    assert len(refused) == len(outcomes) - 1
    assert {exc.option for exc in refused} == {"--save-baseline"}
    assert all("was saved at" in exc.problem and "--replace-baseline" in exc.problem for exc in refused)


def test_saves_replacing_one_name_at_once_leave_one_whole_baseline(tmp_path, monkeypatch):
    outcomes = _save_at_once(tmp_path, monkeypatch, replace=True)
    assert not any(isinstance(o, UserInputError) and "kept being replaced" not in o.problem for o in outcomes)


def test_a_saved_baseline_holds_the_runs_files_but_not_its_claim(tmp_path):
    from nccl_bench.results.run_folder import CLAIM_FILE, claim_run_dir

    run = claim_run_dir(tmp_path / "run", "--out", "me")
    write_run(run, [row()])
    saved = save_baseline(run, "main", tmp_path / "results")
    assert sorted(p.name for p in saved.iterdir()) == ["results.csv"]
    assert (run / CLAIM_FILE).exists()
