"""Launcher environments: which launcher started this rank, and the rank layout it gave.

Three launchers are understood: torchrun (RANK/WORLD_SIZE/LOCAL_RANK), Slurm's srun
(SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) and Open MPI's mpirun (OMPI_COMM_WORLD_*). The last
two need MASTER_ADDR (and optionally MASTER_PORT) for torch's env:// rendezvous; under srun it
defaults to the first host of the step's node list, where task 0 runs (srun sets no MASTER_ADDR).
Pure: reads a mapping.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from nccl_bench.errors import UserInputError
from nccl_bench.units import hostlist

DEFAULT_MASTER_PORT = "29500"
CPU_DEFAULT_WORKERS = 2  # local workers without CUDA: the smallest world in which every collective communicates


@dataclass(frozen=True)
class LaunchEnv:
    launcher: str  # torchrun | slurm | mpirun
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None
    master_port: str | None


def _int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = environ.get(name)
    if raw is None:
        if default is None:
            raise UserInputError(name, "is not set by the launcher")
        return default
    try:
        return int(raw)
    except ValueError:
        raise UserInputError(name, f"expected an integer, got {raw!r}") from None


def detect_launch(environ: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """Which launcher started this process, and the rank layout it gave (checked); None = no launcher."""
    env = os.environ if environ is None else environ
    launch = _launch_from(env)
    if launch is not None:
        _check_layout(launch, env)
    return launch


def _check_layout(launch: LaunchEnv, env: Mapping[str, str]) -> None:
    """A layout no rendezvous can complete, or a port no socket can use, is refused before any waiting."""
    names = {"torchrun": ("RANK", "WORLD_SIZE"), "slurm": ("SLURM_PROCID", "SLURM_NTASKS"),
             "mpirun": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")}[launch.launcher]
    if launch.world_size < 1:
        raise UserInputError(names[1], f"must be at least 1, got {launch.world_size}")
    if not 0 <= launch.rank < launch.world_size:
        last = launch.world_size - 1
        raise UserInputError(names[0], f"{launch.rank} is not a rank of a world of {launch.world_size} (0 to {last})")
    port = env.get("MASTER_PORT")
    if port is not None and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise UserInputError("MASTER_PORT", f"expected a TCP port from 1 to 65535, got {port!r}")


def _launch_from(env: Mapping[str, str]) -> LaunchEnv | None:
    master_addr, master_port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if "RANK" in env and "WORLD_SIZE" in env:
        world = _int(env, "WORLD_SIZE")
        return LaunchEnv(
            "torchrun", _int(env, "RANK"), world, _int(env, "LOCAL_RANK", 0),
            _int(env, "LOCAL_WORLD_SIZE", world), master_addr, master_port,
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        world = _int(env, "SLURM_NTASKS")
        nodes = max(1, _int(env, "SLURM_STEP_NUM_NODES", _int(env, "SLURM_NNODES", 1)))
        return LaunchEnv(
            "slurm", _int(env, "SLURM_PROCID"), world, _int(env, "SLURM_LOCALID", 0),
            max(1, world // nodes),
            master_addr or slurm_first_host(env), master_port or DEFAULT_MASTER_PORT,
        )
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        world = _int(env, "OMPI_COMM_WORLD_SIZE")
        return LaunchEnv(
            "mpirun", _int(env, "OMPI_COMM_WORLD_RANK"), world, _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0),
            _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", world), master_addr, master_port or DEFAULT_MASTER_PORT,
        )
    return None


def slurm_first_host(environ: Mapping[str, str]) -> str | None:
    """The step's first node: task 0's under srun's block and cyclic distributions alike."""
    for name in ("SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"):
        if environ.get(name):
            return hostlist.expand(environ[name], name)[0]
    return None


def export_launch_env(launch: LaunchEnv) -> None:
    """Give torch's env:// rendezvous the variables it reads, whatever launcher we came from."""
    if not launch.master_addr:
        if launch.launcher == "torchrun":  # torchrun sets it; RANK/WORLD_SIZE were set by hand
            raise UserInputError(
                "MASTER_ADDR",
                "must be set when RANK and WORLD_SIZE are (torchrun sets all three; without it, "
                "export MASTER_ADDR=<rank 0's host> and MASTER_PORT)",
            )
        raise UserInputError(
            "MASTER_ADDR",
            f"must be set when launching with {launch.launcher} (e.g. the first node's hostname)",
        )
    os.environ.setdefault("RANK", str(launch.rank))
    os.environ.setdefault("WORLD_SIZE", str(launch.world_size))
    os.environ.setdefault("LOCAL_RANK", str(launch.local_rank))
    os.environ.setdefault("LOCAL_WORLD_SIZE", str(launch.local_world_size))
    os.environ.setdefault("MASTER_ADDR", launch.master_addr)
    os.environ.setdefault("MASTER_PORT", launch.master_port or DEFAULT_MASTER_PORT)


