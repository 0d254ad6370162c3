"""`nccl-bench compare` end to end through the real entry point: exit codes, output files, errors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_bench import options
from tests.helpers.forked_cli import run_fresh
from tests.helpers.launch import REPO, worker_env
from tests.helpers.rows import MiB, row, write_run


def _compare(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`nccl-bench compare ARGS` at COLUMNS=200, writing no CI job's step summary unless env names one: a fresh
    interpreter whose stdout is a pipe, as a shell pipeline gives it (`--json /dev/stdout`)."""
    env = worker_env({"GITHUB_STEP_SUMMARY": "", **(env or {}), "COLUMNS": "200"})
    return run_fresh(["compare", *args], cwd=REPO, env=env, timeout=60)


@pytest.fixture
def runs(tmp_path):
    base = write_run(tmp_path / "base", [row(size_bytes=1024, time_us=10.0), row(size_bytes=MiB, time_us=100.0),
                                         row(size_bytes=4 * MiB, time_us=400.0)])
    same = write_run(tmp_path / "same", [row(size_bytes=1024, time_us=10.5), row(size_bytes=MiB, time_us=104.0),
                                         row(size_bytes=4 * MiB, time_us=390.0)])
    slow = write_run(tmp_path / "slow", [row(size_bytes=1024, time_us=10.0), row(size_bytes=MiB, time_us=100.0),
                                         row(size_bytes=4 * MiB, time_us=600.0)])
    return base, same, slow


def test_equal_runs_exit_0_with_summary(runs):
    base, same, _ = runs
    result = _compare(str(base), str(same))
    assert result.returncode == 0, result.stderr
    assert "OK: 3 rows compared (3 ok)" in result.stdout
    assert result.stderr == ""


def test_regression_exits_1_and_names_the_row(runs, tmp_path):
    base, _, slow = runs
    result = _compare(
        str(base), str(slow / "results.csv"),
        "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"), "--json", str(tmp_path / "r.json"),
    )
    assert result.returncode == 1, result.stderr
    assert "regression: all_reduce 4M float sum in_place n=2: busbw" in result.stdout
    assert "REGRESSION: 3 rows compared (1 regression, 2 ok)" in result.stdout
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("3", "1")
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == 1
    assert "| all_reduce | 4,194,304 |" in (tmp_path / "r.md").read_text()


def test_tolerance_as_fraction_lets_the_drop_through(runs):
    base, _, slow = runs
    # 400 -> 600 us is a 33.3% busbw drop
    assert _compare(str(base), str(slow), "--tolerance", "0.34").returncode == 0
    assert _compare(str(base), str(slow), "--tolerance", "33%").returncode == 1


def test_min_bytes_moves_rows_to_latency_judging(runs):
    base, _, slow = runs
    result = _compare(str(base), str(slow), "--min-bytes", "8M", "--json", "/dev/stdout")
    data = json.loads(result.stdout[result.stdout.index("{"):])
    assert {r["metric"] for r in data["rows"]} == {"time_us"}
    assert data["rows"][2]["delta_pct"] == pytest.approx(50.0)


def test_step_summary_is_appended_when_set(runs, tmp_path):
    base, same, _ = runs
    summary = tmp_path / "step_summary.md"
    summary.write_text("# job\n")
    result = _compare(str(base), str(same), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 0
    text = summary.read_text()
    assert text.startswith("# job\n### nccl-bench compare: ok")
    assert text.count("| all_reduce |") == 3


def test_a_step_summary_that_cannot_be_appended_is_one_warning(runs, tmp_path):
    base, same, _ = runs
    result = _compare(str(base), str(same), env={"GITHUB_STEP_SUMMARY": str(tmp_path)})  # a folder
    assert result.returncode == 0
    assert result.stderr.startswith(f"nccl-bench: warning: cannot append to $GITHUB_STEP_SUMMARY ({tmp_path}): ")
    assert len(result.stderr.splitlines()) == 1 and "ok" in result.stdout


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_foreign_csv_is_one_line_exit_2(runs, tmp_path):
    base, _, _ = runs
    foreign = tmp_path / "nccl_tests.csv"
    foreign.write_text("size,count,type,redop,root,time,algbw,busbw,#wrong\n8,2,float,sum,-1,9.1,0.00,0.00,0\n")
    line = one_error_line(_compare(str(base), str(foreign)))
    assert line.startswith("nccl-bench: error: CURRENT:")
    assert "not an nccl_bench results CSV" in line


def test_malformed_csv_is_one_line_exit_2(runs, tmp_path):
    base, _, _ = runs
    text = (base / "results.csv").read_text().splitlines()
    broken = tmp_path / "broken.csv"
    broken.write_text(text[0] + "\n" + text[1].replace(",1048576,", ",lots,", 1).replace(",1024,", ",lots,", 1) + "\n")
    line = one_error_line(_compare(str(broken), str(base)))
    assert line.startswith("nccl-bench: error: BASELINE:") and "line 2" in line


def test_missing_path_and_bad_options_are_one_line_exit_2(runs, tmp_path):
    base, same, _ = runs
    assert "no results found" in one_error_line(_compare(str(base), str(tmp_path / "nope")))
    assert "--tolerance" in one_error_line(_compare(str(base), str(same), "--tolerance", "10"))
    assert "--min-bytes" in one_error_line(_compare(str(base), str(same), "--min-bytes", "lots"))
    assert "--junit" in one_error_line(_compare(str(base), str(same), "--junit", str(tmp_path / "no" / "r.xml")))


def test_world_size_mismatch_exit_2_unless_allowed(runs, tmp_path):
    base, _, _ = runs
    four = write_run(tmp_path / "four", [dataclasses.replace(row(size_bytes=MiB, time_us=100.0), world_size=4)])
    line = one_error_line(_compare(str(base), str(four)))
    assert "world size differs" in line and "--allow-mismatch" in line
    allowed = _compare(str(base), str(four), "--allow-mismatch")
    assert allowed.returncode == 0, allowed.stderr
    assert "missing in current" in allowed.stdout  # 1K and 4M exist only in the baseline


def test_nccl_tests_log_against_its_report_conversion(tmp_path):
    log = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests" / "v2.20.0_all_reduce_perf_2ranks.txt"
    converted = tmp_path / "converted.csv"
    done = subprocess.run(
        [sys.executable, "-m", "nccl_bench", "report", str(log), "--format", "csv", "--output", str(converted)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = _compare(str(converted), str(log))
    assert result.returncode == 0, result.stderr
    assert "OK: 8 rows compared (8 ok)" in result.stdout


def test_defaults_in_help_match_the_module_constants():
    from nccl_bench import comparison as compare
    from nccl_bench.units.sizes import parse_size

    result = subprocess.run(
        [sys.executable, "-m", "nccl_bench", "compare", "--help"], capture_output=True, text=True,
        env={"COLUMNS": "200", "PATH": ""}, timeout=60,
    )
    assert "[default: 10%]" in result.stdout and "[default: 64K]" in result.stdout
    assert options.TOLERANCE.read("10%") == compare.DEFAULT_TOLERANCE
    assert parse_size("64K") == compare.DEFAULT_MIN_BYTES


def test_torchrun_passes_every_compare_and_baseline_option_through():
    """torchrun's parser must not take any of our options as an abbreviation of one of its own."""
    from torch.distributed.run import get_args_parser

    ours = ["--tolerance", "10%", "--min-bytes", "64K", "--allow-mismatch", "--markdown", "r.md",
            "--junit", "r.xml", "--json", "r.json", "--baseline", "b", "--save-baseline", "main"]
    args = get_args_parser().parse_args(["--nproc-per-node", "2", "-m", "nccl_bench", "sweep", *ours])
    assert args.training_script_args == ["sweep", *ours]
