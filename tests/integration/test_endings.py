"""A rank that dies after its run's ending, with real local workers: stdout, meta.json and the exit
code agree on a complete run, and one note says what happened after it."""

from __future__ import annotations

import json

import pytest

from nccl_bench.errors import EXIT_OK
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import run_cli

pytestmark = pytest.mark.integration

DOCTOR = ["doctor", "--no-plot", "--workers", "2", "--size", "64K", "--iters", "1", "--samples", "1", "--warmup", "0"]


def test_a_rank_killed_after_a_healthy_verdict_leaves_the_verdict_and_its_exit(tmp_path):
    out = tmp_path / "run"
    result = run_cli([*DOCTOR, "--out", str(out)], env={"NCCL_BENCH_FAULT": "killed:0"})
    assert result.returncode == EXIT_OK, result.stderr[-3000:]
    assert "# verdict: healthy" in result.stdout and read_meta(out)["status"] == "complete"
    assert json.loads((out / "doctor.json").read_text())["verdict"] == "healthy"
    said = [line for line in result.stderr.splitlines() if line.startswith("nccl-bench: ") and "launcher" not in line]
    assert len(said) == 1 and said[0].startswith("nccl-bench: note: ") and "killed by SIGKILL" in said[0], said
    assert said[0].endswith("after the doctor had completed; its results are whole")
