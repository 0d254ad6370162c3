"""A sweep's --prom file never holds an earlier run's metrics: node_exporter serves whatever the file
holds, so a run that fails, is interrupted or is refused leaves what it measured and a run_complete of 0,
and a run that completes says 1 (docs/prometheus.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.launch import run_cli, worker_env
from tests.helpers.processes import wait_for
from tests.helpers.rows import rows_on_disk

pytestmark = [pytest.mark.integration]

YESTERDAY = (
    "# TYPE nccl_bench_busbw_bytes_per_second gauge\n"
    'nccl_bench_busbw_bytes_per_second{op="all_reduce",size_bytes="1024"} 9e+11\n'
)
SWEEP = ["sweep", "--no-plot", "--op", "all_reduce", "--iters", "3", "--warmup", "1", "--workers", "2", "--no-history"]


def _yesterdays_prom(folder: Path) -> Path:
    path = folder / "nccl.prom"
    path.write_text(YESTERDAY)
    return path


def _said(prom: Path, status: str, complete: int) -> list[str]:
    """The file's lines after checking it is this run's: no earlier sample, the status and completion given."""
    lines = prom.read_text().splitlines()
    assert "9e+11" not in prom.read_text()
    [info] = [line for line in lines if line.startswith("nccl_bench_run_info{")]
    assert f'status="{status}"' in info
    assert f'nccl_bench_run_complete{{command="sweep"}} {complete}' in lines
    return [line for line in lines if line.startswith("nccl_bench_busbw_bytes_per_second{")]


def test_a_failed_sweep_leaves_what_it_measured_and_says_it_did_not_complete(tmp_path):
    prom = _yesterdays_prom(tmp_path)
    done = run_cli(
        [*SWEEP, "--sizes", "1K,2K,4K", "--prom", str(prom), "--out", str(tmp_path / "run")],
        env={"NCCL_BENCH_FAULT": "crash:1:1"},
        cwd=tmp_path,
    )
    assert done.returncode == 3, done.stderr
    [row] = _said(prom, "failed", 0)
    assert 'size_bytes="1024"' in row


def test_a_refused_sweep_leaves_no_earlier_metrics(tmp_path):
    prom = _yesterdays_prom(tmp_path)
    done = run_cli([*SWEEP, "--sizes", "1K", "--prom", str(prom), "--baseline", str(tmp_path / "none")], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert _said(prom, "refused", 0) == []


@pytest.mark.parametrize("command", ["sweep", "doctor"])
def test_a_run_refused_as_its_options_are_read_leaves_no_earlier_metrics(tmp_path, command):
    prom = _yesterdays_prom(tmp_path)
    done = run_cli([command, "--timeout", "0", "--prom", str(prom)], cwd=tmp_path)  # a bound, not a type
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    lines = prom.read_text().splitlines()
    assert "9e+11" not in prom.read_text() and f'nccl_bench_run_complete{{command="{command}"}} 0' in lines
    assert any('status="refused"' in line for line in lines)


def test_a_complete_sweep_says_so(tmp_path):
    prom = _yesterdays_prom(tmp_path)
    done = run_cli([*SWEEP, "--sizes", "1K", "--prom", str(prom), "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(_said(prom, "complete", 1)) == 1


@pytest.mark.xdist_group("signals")
def test_an_interrupted_sweep_leaves_what_it_measured_and_says_so(tmp_path):
    prom, out = _yesterdays_prom(tmp_path), tmp_path / "run"
    args = [*SWEEP, "--sizes", "1K,2K", "--cycles", "0", "--prom", str(prom), "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "nccl_bench", *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=worker_env(),
    )
    try:
        wait_for(lambda: rows_on_disk(out) >= 2, 120, proc=proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert len(_said(prom, "interrupted", 0)) >= 2


def test_a_doctor_that_cannot_run_leaves_no_earlier_metrics(tmp_path):
    prom = _yesterdays_prom(tmp_path)
    done = run_cli(
        ["doctor", "--no-plot",
         "--workers", "1", "--no-history", "--prom", str(prom), "--out", str(tmp_path / "run")], cwd=tmp_path
    )
    assert done.returncode == 2 and "leave the doctor nothing to measure" in done.stderr
    lines = prom.read_text().splitlines()
    assert "9e+11" not in prom.read_text() and 'nccl_bench_run_complete{command="doctor"} 0' in lines
