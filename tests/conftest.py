"""Shared helpers: run the real CLI under torch's own launcher (torchrun), gloo on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    # A suite run inside a launcher (an srun step, mpirun) must not hand its layout to the tool.
    launcher_vars = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                     "TORCHELASTIC_RUN_ID")
    for name in list(env):
        if name in launcher_vars or name.startswith(("SLURM_", "OMPI_COMM_WORLD_")):
            env.pop(name)
    env.update(extra or {})
    return env


def run_torchrun(nproc: int, args: list[str], *, env: dict[str, str] | None = None, timeout: float = 180,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node N -m nccl_bench ARGS`; --standalone picks a free port."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               "-m", "nccl_bench", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=worker_env(env),
                          cwd=cwd or REPO)


def run_cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 180,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m nccl_bench ARGS` as a user would type it (no launcher)."""
    return subprocess.run([sys.executable, "-m", "nccl_bench", *args], capture_output=True, text=True,
                          timeout=timeout, env=worker_env(env), cwd=cwd or REPO)


@pytest.fixture
def torchrun():
    return run_torchrun


@pytest.fixture
def cli():
    return run_cli


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (a launcher's workers)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def rank_of(pid: int) -> int | None:
    """The RANK a worker process was started with, from its environment."""
    try:
        for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if entry.startswith(b"RANK="):
                return int(entry[5:])
    except OSError:
        return None
    return None
