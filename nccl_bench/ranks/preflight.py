"""What a run on ranks refuses before it starts: a backend this host or build cannot run, buffers that
do not fit in memory, more NCCL workers than GPUs. Every command on ranks checks through here: the life
cycle on each rank (ranks/session.py) and the launcher-less path before any worker starts.
"""

from __future__ import annotations

from nccl_bench.errors import UserInputError
from nccl_bench.options import WORKERS
from nccl_bench.ranks import devices

# Share of the free memory a run may plan to use; the rest is for torch, NCCL and the OS.
MEMORY_HEADROOM = 0.9
# Host memory of one rank's process before any buffer: Python with torch and torch.distributed
# imported is ~218 MiB resident (measured on torch 2.13 CPU); a floor, so it never refuses too much.
RANK_PROCESS_BYTES = 200 * 2**20


def check_memory(required_per_rank: int, ranks_sharing: int, available: int | None, where: str, option: str,
                 command: str) -> None:
    """Refuse, before allocating, buffers that cannot fit; say the numbers."""
    if available is None:
        return
    needed = required_per_rank * ranks_sharing
    if needed > available * MEMORY_HEADROOM:
        raise UserInputError(
            option,
            f"the {command} needs {needed / 2**20:,.0f} MiB of {where} memory "
            f"({ranks_sharing} rank(s) x {required_per_rank / 2**20:,.0f} MiB) "
            f"but only {available / 2**20:,.0f} MiB is available; lower {option}",
        )


def host_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def chosen_backend(requested: str) -> str:
    """--backend resolved for this host (auto: nccl with CUDA, else gloo) and checked against the build."""
    import torch

    backend = devices.choose_backend(requested, torch.cuda.is_available())
    devices.check_backend_built(backend)
    return backend


def check_local_workers(command: str, backend: str, workers: int, bytes_per_rank: int, size_option: str) -> None:
    """What a launcher-less run refuses before starting workers: more NCCL workers than GPUs, and
    host memory for the ranks' processes (and, on CPU, their buffers)."""
    import torch

    on_gpu = devices.device_kind(backend) == "cuda"
    if on_gpu:
        devices.check_workers_fit(workers, torch.cuda.device_count())
    buffers = 0 if on_gpu else bytes_per_rank  # GPU memory: each worker checks its own
    option = size_option if buffers > RANK_PROCESS_BYTES else WORKERS.name
    check_memory(buffers + RANK_PROCESS_BYTES, workers, host_available_bytes(), "host", option, command)
