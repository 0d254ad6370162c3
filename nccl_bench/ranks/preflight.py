"""What a run on ranks refuses before it starts: a backend this host or build cannot run, buffers that
do not fit in memory, more NCCL workers than GPUs, process limits (open files, address space) too low
to start; and the one line for a limit that runs out later. Every command on ranks checks through here: the life
cycle on each rank (ranks/session.py) and the launcher-less path before any worker starts.
"""

from __future__ import annotations

import warnings

from nccl_bench.errors import OptionError, UserInputError
from nccl_bench.ranks import devices

# Share of the free memory a run may plan to use; the rest is for torch, NCCL and the OS.
MEMORY_HEADROOM = 0.9
# Host memory of one rank's process before any buffer: Python with torch and torch.distributed
# imported is ~218 MiB resident (measured on torch 2.13 CPU); a floor, so it never refuses too much.
RANK_PROCESS_BYTES = 200 * 2**20


def check_memory(required_per_rank: int, ranks_sharing: int, available: int | None, where: str, key: str,
                 command: str, remedy: str | None = None) -> None:
    """Refuse, before allocating, buffers that cannot fit; say the numbers and what to do: lower the option
    (its key) that sized them, or `remedy` where no value of it can be lowered (a replay's traces)."""
    if available is None:
        return
    needed = required_per_rank * ranks_sharing
    if needed > available * MEMORY_HEADROOM:
        raise OptionError(key, memory_refusal(required_per_rank, ranks_sharing, available, where, command)
                          + f"; {remedy or f'lower {{{key}}}'}", mentions=(key,))


def memory_refusal(required_per_rank: int, ranks_sharing: int, available: int, where: str, command: str) -> str:
    """The refusal's numbers as they add up: the buffers, plus the share of what is available that is kept
    for torch, NCCL and the OS (MEMORY_HEADROOM), above what is available. Each is shown rounded up, the
    available rounded down, so the sum shown exceeds it as the sum refused did."""
    needed = required_per_rank * ranks_sharing
    kept = available * (1 - MEMORY_HEADROOM)
    mib = 2**20
    return (f"the {command} needs {_mib_up(needed):,} MiB of {where} memory ({ranks_sharing} rank(s) x "
            f"{_mib_up(required_per_rank):,} MiB) + {_mib_up(kept):,} MiB kept free for torch, NCCL and the OS "
            f"({1 - MEMORY_HEADROOM:.0%} of it) = {_mib_up(needed) + _mib_up(kept):,} MiB, but only "
            f"{int(available // mib):,} MiB is available")


def _mib_up(count: float) -> int:
    return -int(-count // 2**20)


def host_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def chosen_backend(requested: str, without_torch: bool = False) -> str:
    """--backend resolved for this host (auto: nccl with CUDA, else gloo) and checked against the build;
    the environment's NCCL choices checked first (check_nccl_choices), as every command on ranks asks here.
    GPUs that CUDA cannot see are said before gloo is chosen for them (check_hidden_gpus).
    without_torch: CUDA's view read from torch's files and the driver's list (cuda_without_torch)."""
    import os

    check_nccl_choices(os.environ)
    if without_torch:
        from nccl_bench.hardware.stack import torch_cuda_build

        cuda_build = torch_cuda_build()
        cuda = cuda_without_torch(os.environ, cuda_build)
    else:
        import torch

        cuda_build, cuda = torch.version.cuda, torch.cuda.is_available()
    if not cuda:
        check_hidden_gpus(requested, os.environ, cuda_build)
    backend = devices.choose_backend(requested, cuda)
    if not without_torch:  # a CUDA build of torch on Linux carries NCCL, and every build gloo
        devices.check_backend_built(backend)
    return backend


def cuda_without_torch(environ, cuda_build: str | None, dev_root: str = "/dev") -> bool:
    """torch.cuda.is_available() as far as it can be told without starting CUDA: a CUDA build of torch,
    a GPU the driver lists, none of the causes that hide it (hardware/hidden_gpus.py). A driver older than
    the build's CUDA is not seen here: such a run reads its facts; the measuring doctor says it."""
    from pathlib import Path

    from nccl_bench.hardware.hidden_gpus import VISIBLE, denied_device_files, listed_gpus, visible_devices_problem

    if cuda_build is None:
        return False
    gpus, _ = listed_gpus()
    return bool(gpus) and visible_devices_problem(environ.get(VISIBLE), gpus) is None and not denied_device_files(
        Path(dev_root))


class HiddenGpuWarning(UserWarning):
    """GPUs the driver lists but CUDA does not see: the run goes on with gloo on the CPU."""


def check_hidden_gpus(requested: str, environ, cuda_build: str | None) -> None:
    """Where CUDA sees no GPU but the driver lists some: --backend nccl is refused naming the cause, and
    auto warns that gloo will run on the CPU instead (a run of the GPUs' host that measures the CPU would
    otherwise be told apart only by its header). An explicit gloo asks for the CPU: nothing is said."""
    from nccl_bench.hardware.hidden_gpus import hidden_gpus_text

    if requested not in ("auto", "nccl"):
        return
    hidden = hidden_gpus_text(environ, cuda_build)
    if hidden is None:
        return
    if requested == "nccl":
        raise OptionError("backend", f"nccl needs a GPU that CUDA can use: {hidden}")
    warnings.warn(f"{hidden}; running gloo on the CPU instead", HiddenGpuWarning, stacklevel=2)


def check_nccl_choices(environ) -> None:
    """NCCL_ALGO and NCCL_PROTO from the environment, refused when NCCL would not know a name in them
    (units/nccl_env.choice_problem): each row would carry a label for a choice that never happened."""
    from nccl_bench.units.nccl_env import CHOICES, choice_problem

    for name in CHOICES:
        problem = choice_problem(name, environ.get(name, ""))
        if problem is not None:
            raise UserInputError(name, f"{problem}; fix or unset it")


def check_local_workers(command: str, backend: str, workers: int, bytes_per_rank: int, size_key: str,
                        size_remedy: str | None = None) -> None:
    """What a launcher-less run refuses before starting workers: more NCCL workers than GPUs, and
    host memory for the ranks' processes (and, on CPU, their buffers). size_key: the option that makes
    the buffers large; size_remedy: what to do where it has no value to lower (check_memory)."""
    import torch

    on_gpu = devices.device_kind(backend) == "cuda"
    if on_gpu:
        devices.check_workers_fit(workers, torch.cuda.device_count())
    buffers = 0 if on_gpu else bytes_per_rank  # GPU memory: each worker checks its own
    key, remedy = (size_key, size_remedy) if buffers > RANK_PROCESS_BYTES else ("workers", None)
    check_memory(buffers + RANK_PROCESS_BYTES, workers, host_available_bytes(), "host", key, command, remedy)


# The soft limit on open files below which a run does not start: on CPU (gloo, torch 2.13), runs of 2
# and 4 local ranks ended with EMFILE from the launcher's store at 24 and ran at 32. NCCL on GPUs opens
# more (devices, sockets, shared memory); a failure there is still one line (exhausted_resource_text).
MIN_OPEN_FILES = 32
# The address space below which torch cannot load (OpenBLAS gives up inside `import torch` with one line
# of its own): measured on torch 2.13 CPU, 683 MiB fails and 977 MiB runs.
MIN_ADDRESS_SPACE = 900 * 2**20
# What to suggest raising the open-file limit to: a common distribution default for the soft limit.
SUGGESTED_OPEN_FILES = 4096


def check_process_limits() -> None:
    """Limits of this process too low for a run to start: one line naming the ulimit to raise, before
    torch loads or any worker starts (workers inherit them)."""
    import resource

    files, files_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if files != resource.RLIM_INFINITY and files < MIN_OPEN_FILES:
        raise UserInputError("ulimit -n", f"{files} open files per process is below the {MIN_OPEN_FILES} a run needs "
                                          f"to start; {_raise_files(files_hard)}")
    space = resource.getrlimit(resource.RLIMIT_AS)[0]
    if space != resource.RLIM_INFINITY and space < MIN_ADDRESS_SPACE:
        raise UserInputError("ulimit -v", f"an address space of {space // 2**20:,} MiB is below the "
                                          f"{MIN_ADDRESS_SPACE // 2**20:,} MiB torch needs to load; raise it "
                                          "(ulimit -v unlimited)")


def exhausted_resource_text(exc: BaseException) -> str | None:
    """One line for a failure that is a limit of the process or the host running out (open files,
    processes or threads, memory), naming what to raise; None for any other failure.

    torch's store reports EMFILE in the text of its own error types, so the text is read as well."""
    import errno
    import resource

    code = exc.errno if isinstance(exc, OSError) else None
    text = str(exc)
    if code == errno.EMFILE or "EMFILE" in text or "Too many open files" in text:
        files, files_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return f"too many open files: each process may open {files} (ulimit -n); {_raise_files(files_hard)}"
    if code == errno.ENFILE:
        return "the system's table of open files is full (fs.file-max): close programs or raise it"
    if code == errno.EAGAIN or "can't start new thread" in text:
        processes = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        limit = "unlimited" if processes == resource.RLIM_INFINITY else str(processes)
        return (f"cannot start another process or thread: {exc.strerror if code else text} (the limit on processes "
                f"is {limit}, ulimit -u); raise it, or end other processes of this user")
    if code == errno.ENOMEM or isinstance(exc, MemoryError):
        space = resource.getrlimit(resource.RLIMIT_AS)[0]
        bound = "" if space == resource.RLIM_INFINITY else f" within the address-space limit of {space // 2**20:,} MiB"
        return f"out of memory{bound}; raise it (ulimit -v) or free memory" if bound else "out of memory; free memory"
    return None


def _raise_files(hard: int) -> str:
    """What to type: the suggested limit, or the hard limit where that is lower (a soft limit cannot pass it)."""
    import resource

    if hard == resource.RLIM_INFINITY or hard >= SUGGESTED_OPEN_FILES:
        return f"raise it (ulimit -n {SUGGESTED_OPEN_FILES})"
    if hard >= MIN_OPEN_FILES:
        return f"raise it (ulimit -n {hard}, the hard limit)"
    return f"raise it: the hard limit is {hard} too (as root, or in /etc/security/limits.conf)"
