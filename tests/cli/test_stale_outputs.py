"""A command that ends before it judges never leaves an earlier run's verdict file for CI to read:
`history check` and `compare` write their --junit and --markdown saying they could not judge (a JUnit
<error>) and remove a --json FILE; the doctor's and the replay's --json FILE (and the doctor's exclude
list) are removed before the run, so a run that fails leaves none; `report`'s --output, --plot and --html
and `history html`'s page are removed when the command fails (a run's --prom: tests/integration/
test_prom_endings.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_bench.history.records import read_record
from tests.helpers.history_runs import doctor_run, sweep_run
from tests.helpers.history_stores import history_cli
from tests.helpers.launch import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GREEN_JUNIT = '<testsuites tests="1" failures="0" errors="0"><testsuite name="yesterday"/></testsuites>\n'
GREEN_MARKDOWN = "### 0 regression(s) in 4 series\n"


def _yesterdays_files(folder: Path) -> dict[str, Path]:
    files = {"junit": folder / "out.xml", "markdown": folder / "out.md", "json": folder / "out.json"}
    files["junit"].write_text(GREEN_JUNIT)
    files["markdown"].write_text(GREEN_MARKDOWN)
    files["json"].write_text('{"regressions": 0}\n')
    return files


def _said_not_judged(files: dict[str, Path], line: str) -> None:
    root = ET.parse(files["junit"]).getroot()
    [error] = root.findall(".//testcase/error")
    assert root.get("errors") == "1" and root.get("failures") == "0"
    assert error.get("message") == f"could not judge: {line}"
    assert files["markdown"].read_text().splitlines()[0].endswith(": could not judge")
    assert line.split(" (")[0].replace("`", "\\`") in files["markdown"].read_text()


def _store_of(folder: Path) -> tuple[str, dict[str, str]]:
    """A history of three complete sweeps, a failed one and a doctor run; the id of each kind."""
    runs = {"complete": sweep_run(folder / "r1", 1), "failed": sweep_run(folder / "f", 4, status="failed"),
            "doctor": doctor_run(folder / "d", 5)}
    store = str(folder / "h.sqlite")
    added = history_cli(folder, store, "add", *map(str, runs.values()), str(sweep_run(folder / "r2", 2)))
    assert added.returncode == 0, added.stderr
    return store, {kind: read_record(run, "RUN", "").run_id for kind, run in runs.items()}


@pytest.mark.parametrize("case,said", [
    ("failed", "ended failed; a run that did not complete is never judged"),
    ("doctor", "has no series to judge (a doctor run, or every row failed)"),
    ("not recorded", "no run 0123456789ab in the history"),
    ("a folder, not a history", "is a folder, not a history file"),
])
def test_check_that_cannot_judge_leaves_its_files_saying_so(tmp_path, case, said):
    store, ids = _store_of(tmp_path)
    files = _yesterdays_files(tmp_path)
    run = {"failed": ids["failed"], "doctor": ids["doctor"]}.get(case, "0123456789ab")
    where = str(tmp_path) if case == "a folder, not a history" else store
    done = history_cli(tmp_path, where, "check", "--run", run, "--junit", "out.xml", "--markdown", "out.md")
    assert done.returncode == (2 if case == "a folder, not a history" else 3), done.stderr
    [line] = done.stderr.splitlines()
    assert said in line
    _said_not_judged(files, line.removeprefix("nccl-bench: error: "))


def test_check_that_judges_replaces_them_with_its_verdict(tmp_path):
    store, ids = _store_of(tmp_path)
    files = _yesterdays_files(tmp_path)
    done = history_cli(tmp_path, store, "check", "--run", ids["complete"], "--junit", "out.xml", "--markdown",
                       "out.md")
    assert done.returncode == 0, done.stderr
    assert ET.parse(files["junit"]).getroot().get("errors") == "0" and "could not judge" not in files[
        "markdown"].read_text()


def test_compare_that_cannot_read_a_run_leaves_its_files_saying_so_and_no_json(tmp_path):
    files = _yesterdays_files(tmp_path)
    done = run_cli(["compare", str(tmp_path / "gone"), str(sweep_run(tmp_path / "r", 1)), "--junit", "out.xml",
                    "--markdown", "out.md", "--json", "out.json"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    _said_not_judged(files, line.removeprefix("nccl-bench: error: "))
    assert not files["json"].exists()


def test_a_doctor_that_cannot_run_leaves_no_json_or_exclude_list_of_an_earlier_run(tmp_path):
    files = _yesterdays_files(tmp_path)
    (tmp_path / "exclude.txt").write_text("node7\n")
    done = run_cli(["doctor", "--workers", "1", "--json", "out.json", "--exclude-file", "exclude.txt", "--out",
                    str(tmp_path / "run")], cwd=tmp_path)
    assert done.returncode == 2 and "leave the doctor nothing to measure" in done.stderr
    assert not files["json"].exists() and not (tmp_path / "exclude.txt").exists()


def test_a_replay_that_cannot_run_leaves_no_json_of_an_earlier_run(tmp_path):
    files = _yesterdays_files(tmp_path)
    done = run_cli(["replay", str(FIXTURES / "traces" / "nccl_128rank_rank0.json.gz"), "--workers", "2", "--json",
                    "out.json", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert done.returncode == 2 and "needs 128 ranks" in done.stderr
    assert not files["json"].exists()


def test_a_report_that_cannot_read_its_run_leaves_none_of_its_files_from_an_earlier_run(tmp_path):
    files = {name: tmp_path / name for name in ("out.md", "busbw.png", "report.html")}
    for path in files.values():
        path.write_text("yesterday's\n")
    done = run_cli(["report", str(tmp_path / "gone"), "--format", "markdown", "--output", "out.md", "--plot",
                    "busbw.png", "--html", "report.html"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and not any(path.exists() for path in files.values())


def test_a_report_whose_output_is_its_input_keeps_it_when_it_fails(tmp_path):
    run = sweep_run(tmp_path / "r", 1)
    done = run_cli(["report", str(run / "results.csv"), str(tmp_path / "gone"), "--format", "csv", "--output",
                    str(run / "results.csv")], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert (run / "results.csv").is_file()


def test_a_history_page_that_cannot_be_made_leaves_no_page_of_an_earlier_run(tmp_path):
    page = tmp_path / "history.html"
    page.write_text("<p>0 regression(s)</p>\n")
    (tmp_path / "not-a-history").mkdir()
    done = history_cli(tmp_path, str(tmp_path / "not-a-history"), "html", str(page))
    assert done.returncode == 2 and "is a folder, not a history file" in done.stderr
    assert not page.exists()


def test_a_command_refused_as_its_options_are_read_leaves_no_earlier_output(tmp_path):
    """The body never runs when an option's value is refused: each command's files still say so, or go."""
    files = _yesterdays_files(tmp_path)
    (tmp_path / "page.html").write_text("<p>0 regression(s)</p>\n")
    (tmp_path / "report.html").write_text("yesterday's\n")
    run = str(sweep_run(tmp_path / "r", 1))
    refused = {
        "compare": ["compare", run, run, "--tolerance", "lots", "--junit", "out.xml", "--markdown", "out.md", "--json",
                    "out.json"],
        "report": ["report", run, "--format", "nope", "--html", "report.html"],
        "history html": ["history", "html", "page.html", "--window", "1"],
    }
    for command, args in refused.items():
        done = run_cli(args, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, (command, done.stderr)
    _said_not_judged(files, run_cli(refused["compare"], cwd=tmp_path).stderr.splitlines()[0].removeprefix(
        "nccl-bench: error: "))
    assert not files["json"].exists() and not (tmp_path / "report.html").exists()
    assert not (tmp_path / "page.html").exists()


def test_a_history_check_refused_as_its_options_are_read_leaves_its_files_saying_so(tmp_path):
    files = _yesterdays_files(tmp_path)
    done = history_cli(tmp_path, str(tmp_path / "h.sqlite"), "check", "--window", "1", "--junit", "out.xml",
                       "--markdown", "out.md")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    _said_not_judged(files, line.removeprefix("nccl-bench: error: "))
