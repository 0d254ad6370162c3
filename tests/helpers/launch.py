"""The real CLI as a user starts it: `python -m nccl_bench`, or under torch's own launcher (torchrun), gloo on CPU.

Both fork from one process that has imported torch (forked_cli.py); tests that signal or watch the process
start it themselves, with worker_env().
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.forked_cli import run_forked

REPO = Path(__file__).resolve().parents[2]

# One real two-rank sweep that several modules only read (tables, reports, plots, exports): the
# session's `shared_sweep` fixture runs it once.
SHARED_SWEEP = ["sweep", "--workers", "2", "--op", "all_reduce,all_gather", "--sizes", "1K,64K,2M", "--iters", "3",
                "-w", "1", "--peak", "20"]


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
    argv = ["--standalone", "--nproc_per_node", str(nproc), "-m", "nccl_bench", *args]
    return run_forked(argv, module="torch.distributed.run", cwd=cwd or REPO, env=worker_env(env), timeout=timeout)


def run_cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 180,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m nccl_bench ARGS` as a user would type it (no launcher)."""
    return run_forked(args, cwd=cwd or REPO, env=worker_env(env), timeout=timeout)


def ok(done: subprocess.CompletedProcess) -> str:
    """The stdout of a command that must have exited 0; a failure shows all that it said."""
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout
