"""benchmarks/gpu_smoke.sh and gpu_multi.sh in their --cpu mode: the scripts' own logic (launches,
exit codes read from the right process, per-step limits, summary and tarball) runs on every commit.

A part of each script runs here (the suite's time is short); every check they call is tested on
passing and failing inputs in tests/unit/benchmarks/test_gpu_smoke_checks.py.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from tests.helpers.launch import REPO, worker_env


def _script(name: str, out: Path, *args: str, steps: str, scale: str = "4") -> tuple[int, list[str]]:
    env = worker_env({"PYTHON": sys.executable, "SMOKE_STEPS": steps, "SMOKE_LIMIT_SCALE": scale})
    result = subprocess.run(["bash", str(REPO / "benchmarks" / name), *args, str(out)], capture_output=True,
                            text=True, env=env, timeout=300, cwd=REPO)
    summary = (out / "summary.txt").read_text().splitlines()
    assert result.stdout.splitlines()[: len(summary)] == summary, result.stderr[-2000:]
    return result.returncode, summary


def _verdicts(summary: list[str]) -> dict[str, str]:
    return {line.split(":", 1)[0].split()[1]: line.split()[0] for line in summary if line.split()[0] in
            ("PASS", "FAIL", "SKIP")}


def test_smoke_cpu_mode_passes_its_refusal_run_and_torchrun_checks(tmp_path):
    """The stall steps wait out their --timeout; test_a_step_past_its_limit_fails_the_script starts one."""
    out = tmp_path / "smoke"
    code, summary = _script("gpu_smoke.sh", out, "--cpu", steps="too_large meta_env torchrun_exit blocking")
    assert code == 0, summary
    assert _verdicts(summary) == {"gpu": "SKIP", "too_large": "PASS", "meta_env": "PASS", "torchrun": "PASS",
                                  "blocking": "SKIP", "budget": "PASS"}
    assert "SKIP blocking: needs CUDA (--cpu mode)" in summary
    assert summary[-1] == "4 passed, 0 failed, 2 skipped (cpu mode)"  # the budget counts
    with tarfile.open(out / "runs.tar.gz") as tar:
        names = tar.getnames()
    assert "runs/meta_env/meta.json" in names and "logs/too_large.log" in names


def test_a_step_past_its_limit_fails_the_script(tmp_path):
    code, summary = _script("gpu_smoke.sh", tmp_path / "slow", "--cpu", steps="stall_defaults", scale="0.1")
    assert code == 1
    assert "FAIL stall_defaults: killed at its limit of 3s" in summary
    assert summary[-1] == "1 passed, 1 failed, 1 skipped (cpu mode)"  # the budget still passes


def test_gpu_mode_without_a_gpu_fails_at_once_and_says_why(tmp_path):
    code, summary = _script("gpu_smoke.sh", tmp_path / "nogpu", steps="")
    assert code == 1
    assert summary[0] == ("FAIL gpu: torch sees 0 CUDA device(s), 1 needed; nothing else can run (--cpu runs the "
                          "steps on gloo)")


def test_multi_cpu_mode_names_the_killed_rank(tmp_path):
    code, summary = _script("gpu_multi.sh", tmp_path / "multi", "--cpu", steps="kill_rank1 graph")
    assert code == 0, summary
    assert _verdicts(summary) == {"gpu": "SKIP", "kill_rank1": "PASS", "graph": "SKIP", "budget": "PASS"}


def test_on_one_gpu_every_limit_adds_up_under_the_budget(tmp_path):
    """GPU mode with a stand-in interpreter that says one GPU is there and runs nothing: every step
    and checker of a one-GPU run is started, so the budget line adds up all their limits."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/bash\ncase "$*" in\n  *device_count*) echo "1 FakeGPU torch 2.11 nccl 2.28.9";;\n'
                    '  *socket*) echo 29999;;\nesac\nexit 0\n')
    fake.chmod(0o755)
    env = worker_env({"PYTHON": str(fake)})
    env.pop("SMOKE_STEPS", None)
    out = tmp_path / "gpu"
    subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_smoke.sh"), str(out)], capture_output=True, text=True,
                   env=env, timeout=120, cwd=REPO)
    summary = (out / "summary.txt").read_text().splitlines()
    [budget] = [line for line in summary if " budget: " in line]
    planned = int(budget.split("add up to ", 1)[1].split("s,", 1)[0])
    assert budget.startswith("PASS budget:") and 450 < planned < 540, budget
    timed = (out / "timings.txt").read_text().splitlines()
    assert sum(line.startswith("check ") for line in timed) >= 20  # the checkers count too
    assert "SKIP two_ranks: one GPU cannot hold two NCCL ranks (gpu_multi.sh needs two)" in summary
