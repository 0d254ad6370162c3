"""Whose run a rank is: its claim token, its elastic attempt, and the parent whose death ends it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from nccl_bench.ranks import run_owner


def test_the_clis_token_is_what_its_workers_claim_with():
    assert run_owner.claimant({run_owner.RUN_CLAIM_ENV: "pid 1 on a, 0123abcd"}) == "pid 1 on a, 0123abcd"


def test_every_attempt_of_one_torchrun_job_has_one_token():
    env = {"TORCHELASTIC_RUN_ID": "job7", run_owner.ATTEMPT_ENV: "0"}
    first = run_owner.claimant(env)
    assert first == run_owner.claimant({**env, run_owner.ATTEMPT_ENV: "1"})
    assert first.startswith(f"torchrun pid {os.getppid()} on ") and first.endswith(", run job7")


def test_without_a_launcher_token_each_run_has_its_own():
    assert run_owner.claimant({}) != run_owner.claimant({})


def test_the_attempt_is_torchs_restart_count():
    assert [run_owner.attempt(env) for env in ({}, {run_owner.ATTEMPT_ENV: "2"}, {run_owner.ATTEMPT_ENV: "x"})] == [
        0, 2, 0]


_ORPHAN = """
import sys, time
from nccl_bench.ranks.run_owner import ParentWatch
watch = ParentWatch({"NCCL_BENCH_PARENT_PID": sys.argv[1]}, "torchrun", poll_s=0.05).__enter__()
print("watching", flush=True)
time.sleep(60)
"""


def test_a_rank_whose_parent_is_gone_gets_a_sigterm():
    """A parent pid that is not ours stands for a parent that died before the rank looked."""
    ended = subprocess.Popen(["true"])
    ended.wait()  # a pid that is no process's now: never this child's parent
    child = subprocess.run([sys.executable, "-c", _ORPHAN, str(ended.pid)], capture_output=True, text=True,
                           timeout=30)
    assert child.returncode == -signal.SIGTERM


def test_a_rank_whose_parent_lives_is_left_alone():
    child = subprocess.run([sys.executable, "-c", _ORPHAN.replace("time.sleep(60)", "time.sleep(0.5)"),
                            str(os.getpid())], capture_output=True, text=True, timeout=30)
    assert child.returncode == 0


def test_only_a_rank_a_launcher_started_watches_its_parent():
    def enabled(launcher, env):
        return run_owner.ParentWatch(env, launcher).enabled

    assert enabled("torchrun", {"TORCHELASTIC_RUN_ID": "x"}) and enabled("slurm", {}) and enabled("mpirun", {})
    assert enabled("torchrun", {run_owner.PARENT_PID_ENV: "12"})
    assert not enabled("torchrun", {})  # RANK and WORLD_SIZE set by hand: a shell is no launcher
