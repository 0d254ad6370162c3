"""A closed or full stdout is not a failure of the measurement, with real processes.

stdout that is a pipe nobody reads any more (`| head -1`) or a device with no space left
(`>/dev/full`): the run goes on, its files are written, meta.json says "complete" and the exit code
is the measurement's. A closed pipe was the reader's choice and is not mentioned; a full device is
said once on stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nccl_bench.errors import EXIT_OK
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import REPO, worker_env
from tests.helpers.rows import row, write_run

pytestmark = pytest.mark.integration

SWEEP = ["sweep", "--no-plot",
         "--op", "all_reduce", "--sizes", "1K,2K", "--iters", "2", "--warmup", "1", "--workers", "2"]
DOCTOR = ["doctor", "--no-plot", "--workers", "2", "--size", "64K", "--iters", "1", "--samples", "1", "--warmup", "0"]
FULL_STDOUT = "nccl-bench: warning: stdout: No space left on device; the output from there on was dropped"


def _run(args: list[str], stdout: str) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reader has gone ("closed") or /dev/full ("full")."""
    if stdout == "full":
        with open("/dev/full", "w") as full:
            return subprocess.run([sys.executable, "-m", "nccl_bench", *args], stdout=full, stderr=subprocess.PIPE,
                                  text=True, timeout=180, env=worker_env(), cwd=REPO)
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE, from the first
    try:
        return subprocess.run([sys.executable, "-m", "nccl_bench", *args], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=180, env=worker_env(), cwd=REPO)
    finally:
        os.close(write_end)


def _assert_quiet_but_for(stderr: str, expected: list[str]) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "error" in line or "warning" in line]
    assert [line for line in said if not any(line.startswith(e) for e in expected)] == [], stderr[-3000:]
    for start in expected:
        assert sum(line.startswith(start) for line in said) == 1, stderr[-3000:]


@pytest.mark.parametrize("stdout", ["closed", "full"])
def test_a_sweep_whose_stdout_fails_completes_and_writes_its_files(tmp_path, stdout):
    out = tmp_path / "run"
    result = _run([*SWEEP, "--out", str(out)], stdout)
    assert result.returncode == EXIT_OK, result.stderr[-3000:]
    assert read_meta(out)["status"] == "complete"
    assert [row.size_bytes for row in read_rows(out)] == [1024, 2048]
    _assert_quiet_but_for(result.stderr, [FULL_STDOUT] if stdout == "full" else [])


def test_a_doctor_whose_stdout_is_closed_reaches_its_verdict(tmp_path):
    out = tmp_path / "run"
    result = _run([*DOCTOR, "--out", str(out)], "closed")
    assert result.returncode == EXIT_OK, result.stderr[-3000:]
    assert read_meta(out)["status"] == "complete" and read_meta(out)["verdict"] == "healthy"
    _assert_quiet_but_for(result.stderr, [])


@pytest.mark.parametrize("stdout", ["closed", "full"])
def test_compare_whose_stdout_fails_still_writes_its_reports(tmp_path, stdout):
    run = write_run(tmp_path / "run", [row()])
    junit, markdown = tmp_path / "j.xml", tmp_path / "c.md"
    result = _run(["compare", str(run), str(run), "--junit", str(junit), "--markdown", str(markdown)], stdout)
    assert result.returncode == EXIT_OK, result.stderr[-3000:]
    assert "<testsuite" in junit.read_text() and markdown.read_text().strip()
    _assert_quiet_but_for(result.stderr, [FULL_STDOUT] if stdout == "full" else [])
