"""Launcher environment, backend and device choice, process-group life cycle, cross-rank helpers.

Three launchers are understood: torchrun (RANK/WORLD_SIZE/LOCAL_RANK), Slurm's srun
(SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) and Open MPI's mpirun (OMPI_COMM_WORLD_*). The last
two need MASTER_ADDR (and optionally MASTER_PORT) for torch's env:// rendezvous.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from nccl_bench.errors import RunFailedError, UserInputError, first_line

DEFAULT_MASTER_PORT = "29500"
ROLL_CALL_POLL_S = 0.1  # store polling after a failure: quick to notice the last live rank, cheap


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
    try:
        with _stderr_kept_unless_failed():
            dist.init_process_group(
                backend=backend,
                init_method="env://",
                rank=launch.rank,
                world_size=launch.world_size,
                timeout=_dt.timedelta(seconds=timeout_s),
                **extra,
            )
    except (dist.DistNetworkError, dist.DistStoreError) as exc:
        where = f"MASTER_ADDR={os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')}"
        raise RunFailedError(
            f"rendezvous at {where} failed on rank {launch.rank} within --timeout {timeout_s:g} s "
            f"({backend_error_text(exc)}); check that address and port, and that every rank started"
        ) from None
    _publish_process(launch.rank)
    try:
        yield DistContext(launch.rank, launch.world_size, launch.local_rank, backend, device)
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


@contextlib.contextmanager
def _stderr_kept_unless_failed() -> Iterator[None]:
    """Hold what C++ code writes to stderr meanwhile: shown on success, dropped on failure.

    torch's TCPStore prints a C++ stack for every failed connection attempt while it retries; the
    failure itself is reported as one line, so those frames would only bury it.
    """
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not failed:
                held.seek(0)
                text = held.read()
                if text:
                    os.write(2, text)


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


def roll_call(ctx: DistContext, wait_s: float) -> tuple[list[int], list[int]] | None:
    """After a failure or signal: mark this rank as leaving, then (ranks that left too, the others).

    Uses the rendezvous store rather than a collective, which can no longer be trusted. Under
    torchrun the store lives in the launcher agent, so it outlives any rank. None = unreachable.
    """
    mark_leaving(ctx)
    keys = [f"nccl_bench/leaving/{rank}" for rank in range(ctx.world_size)]
    try:
        store = _store()
        deadline = time.monotonic() + wait_s
        while True:
            present = [rank for rank, key in enumerate(keys) if store.check([key])]
            if len(present) == ctx.world_size or time.monotonic() >= deadline:
                return present, [rank for rank in range(ctx.world_size) if rank not in present]
            time.sleep(ROLL_CALL_POLL_S)
    except Exception:  # the store went with a dead rank (env:// hosts it in rank 0)
        return None


def _store():
    import torch.distributed as dist

    return dist.distributed_c10d._get_default_store()


def _publish_process(rank: int) -> None:
    """Host and pid of this rank in the store, so a peer on the same host can tell if it died."""
    with contextlib.suppress(Exception):
        _store().set(f"nccl_bench/process/{rank}", f"{hostname()} {os.getpid()}")


def mark_leaving(ctx: DistContext) -> None:
    """This rank stops on purpose (a signal or a reported failure): peers must not take it for a crash."""
    with contextlib.suppress(Exception):
        store = _store()
        store.set_timeout(_dt.timedelta(seconds=5))  # a store that went away must not hold us for --timeout
        store.set(f"nccl_bench/leaving/{ctx.rank}", "1")


def local_peer_states(ctx: DistContext) -> dict[int, str]:
    """Other ranks on this host that did not leave on purpose: rank -> "running", or what befell it."""
    found: dict[int, str] = {}
    try:
        store, me = _store(), hostname()
        for rank in range(ctx.world_size):
            if rank == ctx.rank or not store.check([f"nccl_bench/process/{rank}"]):
                continue
            host, pid = store.get(f"nccl_bench/process/{rank}").decode().rsplit(" ", 1)
            if host != me or store.check([f"nccl_bench/leaving/{rank}"]):
                continue
            state = process_state(int(pid))
            if state in (None, "Z"):
                found[rank] = f"process {pid} died"
            elif state == "T":
                found[rank] = f"process {pid} is stopped"
            else:
                found[rank] = "running"
    except Exception:  # best effort: the store may be gone with rank 0
        pass
    return found


def process_state(pid: int) -> str | None:
    """Linux state letter of a process (R, S, T, Z...), None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


_SOURCE_LOCATION = re.compile(r"^\[[^\]]*\.(?:cc|cpp|cu|h|hpp):\d+\]\s*")


def backend_error_text(exc: BaseException) -> str:
    """What a gloo/NCCL error says happened, without its source location and generic advice."""
    text = first_line(exc)
    while _SOURCE_LOCATION.match(text):
        text = _SOURCE_LOCATION.sub("", text, count=1)
    return text.split(". ", 1)[0].rstrip(". ") or type(exc).__name__


def synchronize(ctx: DistContext) -> None:
    """Wait for the GPU work queued so far (a no-op on CPU, where ops complete before returning)."""
    if ctx.on_gpu:
        import torch

        torch.cuda.synchronize()


def barrier(ctx: DistContext) -> None:
    import torch.distributed as dist

    if ctx.on_gpu:
        dist.barrier(device_ids=[ctx.device.index])
    else:
        dist.barrier()


def hostname() -> str:
    return socket.gethostname()
