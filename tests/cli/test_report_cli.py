"""`nccl-bench report` input handling: one clear line and exit 2 for bad input, never a traceback."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"


def _error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


def test_nccl_tests_log_in_nccl_tests_format():
    done = run_cli(["report", str(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"), "--format", "nccl-tests"])
    assert done.returncode == 0, done.stderr
    data = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]
    assert data[0] == "        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33    0.27    0.27       0"
    assert "# Avg bus bandwidth    : 0.65375 " in done.stdout.splitlines()


def test_bad_format():
    line = _error(run_cli(["report", str(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"), "--format", "xml"]))
    assert line == "nccl-bench: error: --format: unknown format 'xml'; choose one of table, markdown, csv, json, nccl-tests"


def test_missing_run(tmp_path):
    line = _error(run_cli(["report", str(tmp_path / "nope")]))
    assert line == f"nccl-bench: error: RUN: no results found at {tmp_path / 'nope'}"


def test_plot_path_checked_before_reading(tmp_path):
    line = _error(run_cli(["report", str(tmp_path / "nope"), "--plot", str(tmp_path / "x" / "p.png")]))
    assert line == f"nccl-bench: error: --plot: folder {tmp_path / 'x'} does not exist"


def test_not_a_result_file(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    assert _error(run_cli(["report", str(junk)])) == f"nccl-bench: error: RUN: {junk}: no nccl-tests result lines found"
