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

# init_process_group(device_id=...) appeared in torch 2.3 (pytorch #114916; the first release whose
# signature has it), which is why 2.3 is the minimum torch.
DEVICE_ID_SINCE = (2, 3)
# torch 2.6.0 up to 2.7.0: a device_id turns on NCCL's non-blocking init, which can hang collectives
# (pytorch #153960; 2.7.1 turned the non-blocking default off, pytorch #154055). There the device is
# only set with torch.cuda.set_device and the communicator is created on the first collective.
DEVICE_ID_HANGS = ((2, 6), (2, 7, 1))
# NCCL settings the sweep needs, set only where the user has not chosen (both land in meta.json):
NCCL_ENV_DEFAULTS = {
    # 2 = CleanUpOnly: an NCCL error or timeout aborts the communicators and the main thread sees the
    # error. torch's default 3 (SkipCleanUp) takes the process down with SIGABRT instead, before the
    # sweep can report and write meta.json (ErrorHandlingMode in ProcessGroupNCCL.hpp).
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
    # After an error the watchdog sleeps 4x this before acting, for a flight-recorder dump (15 s by
    # default: a minute during which the rank can neither report nor exit). A benchmark fails fast.
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "1000",
}
# NCCL's own watchdog gets this much longer than the rank's deadline (ranks/deadline.py), so that the
# deadline always acts first and the watchdog never starts its pre-abort sleep under it.
NCCL_WATCHDOG_LAG_S = 10.0


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


def cuda_device_index(local_rank: int, local_world_size: int, device_count: int,
                      environ: Mapping[str, str], launcher: str) -> int:
    """Which cuda:N this rank uses, never an index that does not exist.

    One GPU per rank on the host (LOCAL_RANK < device_count): cuda:LOCAL_RANK. Fewer visible GPUs than
    local ranks only works where the launcher narrows each task's CUDA_VISIBLE_DEVICES (srun
    --gpus-per-task, an mpirun wrapper): then each task uses the first GPU it sees, cuda:0. torchrun
    never narrows it, so there the ranks would share GPUs, which NCCL refuses: say so now.
    """
    if device_count < 1:
        raise UserInputError("--backend", "nccl needs a CUDA GPU, and none is visible to this rank; use gloo")
    if local_rank < device_count and local_world_size <= device_count:
        return local_rank
    if launcher in ("slurm", "mpirun") and environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        return 0
    layout = {
        "torchrun": f"torchrun --nproc_per_node {local_world_size}",
        "slurm": f"srun with {local_world_size} tasks on this node and no per-task CUDA_VISIBLE_DEVICES "
                 "(give each task its GPU: --gpus-per-task 1)",
        "mpirun": f"mpirun with {local_world_size} ranks on this node and no per-rank CUDA_VISIBLE_DEVICES",
    }.get(launcher, f"{local_world_size} ranks on this node")
    raise UserInputError(
        "launcher",
        f"{layout} needs {local_world_size} GPUs, but {device_count} is visible "
        f"(local rank {local_rank} would have none); start at most {device_count} rank(s) per node",
    )


def check_workers_fit(workers: int, device_count: int) -> None:
    """--workers on NCCL: one GPU each (local workers all see the same GPUs), refused before any starts."""
    if workers > device_count:
        raise UserInputError(
            "--workers", f"{workers} NCCL workers need {workers} GPUs, but {device_count} is visible here; "
            f"use --workers {device_count} or fewer (or --backend gloo)",
        )


def version_tuple(version: str) -> tuple[int, ...]:
    """(2, 7, 1) from '2.7.1+cu126' or '2.8.0a0+git...'; non-numeric parts end it."""
    numbers = []
    for part in version.split("+", 1)[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(numbers)


def passes_device_id(torch_version: str) -> bool:
    """Whether init_process_group gets device_id (eager NCCL init) on this torch: not where it can hang."""
    version = version_tuple(torch_version)
    low, high = DEVICE_ID_HANGS
    return version >= DEVICE_ID_SINCE and not (low <= version < high)


def nccl_env_to_set(environ: Mapping[str, str]) -> dict[str, str]:
    """NCCL_ENV_DEFAULTS the user has not chosen, under either name torch reads (TORCH_NCCL_X, NCCL_X)."""
    return {name: value for name, value in NCCL_ENV_DEFAULTS.items()
            if name not in environ and name.replace("TORCH_", "", 1) not in environ}


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


class _Aborted:
    done = False  # the process group was aborted: destroying it would wait on what the abort cut short


_aborted = _Aborted()


@contextlib.contextmanager
def process_group(launch: LaunchEnv, backend: str, timeout_s: float, device_index: int | None = None
                  ) -> Iterator[DistContext]:
    """The one place a process group is created and destroyed (also on error or interrupt)."""
    import torch
    import torch.distributed as dist

    from nccl_bench.ranks import deadline

    export_launch_env(launch)
    extra = {}
    group_timeout_s = timeout_s
    if device_kind(backend) == "cuda":
        device = torch.device("cuda", launch.local_rank if device_index is None else device_index)
        torch.cuda.set_device(device)
        if passes_device_id(torch.__version__):
            extra["device_id"] = device
        os.environ.update(nccl_env_to_set(os.environ))
        group_timeout_s = timeout_s + deadline.MARGIN_S + deadline.GRACE_S + NCCL_WATCHDOG_LAG_S
    else:
        device = torch.device("cpu")
    _aborted.done = False
    try:
        with _stderr_kept_unless_failed():
            dist.init_process_group(
                backend=backend,
                init_method="env://",
                rank=launch.rank,
                world_size=launch.world_size,
                timeout=_dt.timedelta(seconds=group_timeout_s),
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
        if not _aborted.done:  # after an abort, shutdown would flush and join what the abort cut short
            with contextlib.suppress(Exception):
                dist.destroy_process_group()


def default_group():
    """The default process group object (None without one)."""
    import torch.distributed as dist

    return dist.distributed_c10d._get_default_group() if dist.is_initialized() else None


def abort_group(group) -> None:
    """Abort a process group through torch's API, callable from any thread.

    ProcessGroup.abort (torch 2.11: on ProcessGroup, ProcessGroupNCCL and the backend) aborts every
    backend (ncclCommAbort: waiting NCCL kernels return; gloo's Backend.abort does nothing). Older
    torch has only distributed_c10d._abort_process_group (it also forgets the group).
    """
    import torch.distributed as dist

    if group is None:
        return
    _aborted.done = True
    if callable(getattr(group, "abort", None)):
        group.abort()
        return
    legacy = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if legacy is not None:
        legacy(group)


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


LEFT_ON_SIGNAL = "signal"


def mark_leaving(ctx: DistContext, why: str = LEFT_ON_SIGNAL) -> None:
    """This rank stops on purpose: peers must not take it for a crash, and may read why (a signal, or
    the one-line failure it saw, which a peer that only saw the consequence reports instead)."""
    with contextlib.suppress(Exception):
        store = _store()
        store.set_timeout(_dt.timedelta(seconds=5))  # a store that went away must not hold us for --timeout
        key = f"nccl_bench/leaving/{ctx.rank}"
        if why == LEFT_ON_SIGNAL and store.check([key]):
            return  # a failure recorded first stays: the signal that followed it is its consequence
        store.set(key, why)


def leaving_reasons(ctx: DistContext) -> dict[int, str]:
    """Why each other rank that left on purpose left (LEFT_ON_SIGNAL or its failure line)."""
    found: dict[int, str] = {}
    with contextlib.suppress(Exception):
        store = _store()
        for rank in range(ctx.world_size):
            key = f"nccl_bench/leaving/{rank}"
            if rank != ctx.rank and store.check([key]):
                found[rank] = store.get(key).decode(errors="replace")
    return found


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
