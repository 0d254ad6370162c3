"""Launcher environment, backend and device choice, process-group life cycle, cross-rank helpers.

Three launchers are understood: torchrun (RANK/WORLD_SIZE/LOCAL_RANK), Slurm's srun
(SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) and Open MPI's mpirun (OMPI_COMM_WORLD_*). The last
two need MASTER_ADDR (and optionally MASTER_PORT) for torch's env:// rendezvous.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from nccl_bench.errors import UserInputError

DEFAULT_MASTER_PORT = "29500"


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
    """Which launcher started this process, and the rank layout it gave; None = no launcher."""
    env = os.environ if environ is None else environ
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
            master_addr, master_port or DEFAULT_MASTER_PORT,
        )
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        world = _int(env, "OMPI_COMM_WORLD_SIZE")
        return LaunchEnv(
            "mpirun", _int(env, "OMPI_COMM_WORLD_RANK"), world, _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0),
            _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", world), master_addr, master_port or DEFAULT_MASTER_PORT,
        )
    return None


def export_launch_env(launch: LaunchEnv) -> None:
    """Give torch's env:// rendezvous the variables it reads, whatever launcher we came from."""
    if launch.launcher != "torchrun" and not launch.master_addr:
        raise UserInputError(
            "MASTER_ADDR",
            f"must be set when launching with {launch.launcher} (e.g. the first node's hostname)",
        )
    os.environ.setdefault("RANK", str(launch.rank))
    os.environ.setdefault("WORLD_SIZE", str(launch.world_size))
    os.environ.setdefault("LOCAL_RANK", str(launch.local_rank))
    os.environ.setdefault("LOCAL_WORLD_SIZE", str(launch.local_world_size))
    if launch.master_addr:
        os.environ.setdefault("MASTER_ADDR", launch.master_addr)
    if launch.master_port:
        os.environ.setdefault("MASTER_PORT", launch.master_port)


def choose_backend(requested: str, cuda_available: bool) -> str:
    """auto = nccl with CUDA, else gloo; an explicit choice is taken as given."""
    if requested != "auto":
        if requested == "nccl" and not cuda_available:
            raise UserInputError("--backend", "nccl needs CUDA GPUs, and none is available here; use gloo")
        return requested
    return "nccl" if cuda_available else "gloo"


def check_backend_built(backend: str) -> None:
    """Refuse, before any worker or process group, a backend this torch build does not contain."""
    import torch
    import torch.distributed as dist

    built = {
        "gloo": dist.is_gloo_available, "nccl": dist.is_nccl_available,
        "mpi": dist.is_mpi_available, "ucc": dist.is_ucc_available,
    }.get(backend)
    if built is not None and not built():
        raise UserInputError("--backend", f"this torch ({torch.__version__}) was built without {backend}; use gloo")


def device_kind(backend: str) -> str:
    """Which device the buffers live on: NCCL works on CUDA tensors, the others here on CPU."""
    return "cuda" if backend == "nccl" else "cpu"


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: Any  # torch.device

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"


@contextlib.contextmanager
def process_group(launch: LaunchEnv, backend: str, timeout_s: float) -> Iterator[DistContext]:
    """The one place a process group is created and destroyed (also on error or interrupt)."""
    import torch
    import torch.distributed as dist

    export_launch_env(launch)
    if device_kind(backend) == "cuda":
        device = torch.device("cuda", launch.local_rank)
        torch.cuda.set_device(device)
        extra = {"device_id": device}
    else:
        device = torch.device("cpu")
        extra = {}
    dist.init_process_group(
        backend=backend,
        init_method="env://",
        rank=launch.rank,
        world_size=launch.world_size,
        timeout=_dt.timedelta(seconds=timeout_s),
        **extra,
    )
    try:
        yield DistContext(launch.rank, launch.world_size, launch.local_rank, backend, device)
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def all_gather_floats(ctx: DistContext, values: list[float]) -> list[list[float]]:
    """Every rank's list of floats (all lists the same length), on every rank."""
    import torch
    import torch.distributed as dist

    local = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    gathered = [torch.empty_like(local) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, local)
    return [t.tolist() for t in gathered]


def max_across_ranks(ctx: DistContext, values: list[float]) -> list[float]:
    """Element-wise maximum over ranks (used for per-op latencies and agreeing on a count)."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def sum_across_ranks(ctx: DistContext, value: int) -> int:
    import torch
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return int(tensor.item())


def gather_objects(ctx: DistContext, obj: Any) -> list[Any]:
    import torch.distributed as dist

    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ctx: DistContext) -> None:
    import torch.distributed as dist

    if ctx.on_gpu:
        dist.barrier(device_ids=[ctx.device.index])
    else:
        dist.barrier()


def hostname() -> str:
    return socket.gethostname()
