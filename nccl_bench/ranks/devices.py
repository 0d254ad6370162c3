"""Backend and device choice, and the torch versions that change how a device is set up.

Decided before any process group exists, so a layout that cannot work is refused in one line.
"""

from __future__ import annotations

import os
import re
from typing import Mapping

from nccl_bench.errors import OptionError, UserInputError

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


def choose_backend(requested: str, cuda_available: bool) -> str:
    """auto = nccl with CUDA, else gloo; an explicit choice is taken as given."""
    if requested != "auto":
        if requested == "nccl" and not cuda_available:
            raise OptionError("backend", "nccl needs CUDA GPUs, and none is available here; use gloo")
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
        raise OptionError("backend", f"this torch ({torch.__version__}) was built without {backend}; use gloo")


def cuda_device_index(local_rank: int, local_world_size: int, device_count: int,
                      environ: Mapping[str, str], launcher: str) -> int:
    """Which cuda:N this rank uses, never an index that does not exist.

    One GPU per rank on the host (LOCAL_RANK < device_count): cuda:LOCAL_RANK. Fewer visible GPUs than
    local ranks only works where the launcher narrows each task's CUDA_VISIBLE_DEVICES (srun
    --gpus-per-task, an mpirun wrapper): then each task uses the first GPU it sees, cuda:0. torchrun
    never narrows it, so there the ranks would share GPUs, which NCCL refuses: say so now.
    """
    if device_count < 1:
        raise OptionError("backend", "nccl needs a CUDA GPU, and none is visible to this rank; use gloo")
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
    """Local workers on NCCL: one GPU each (they all see the same GPUs), refused before any starts."""
    if workers > device_count:
        raise OptionError(
            "workers", f"{workers} NCCL workers need {workers} GPUs, but {device_count} is visible here; "
            f"use {{workers}} {device_count} or fewer (or {{backend}} gloo)", mentions=("workers", "backend"),
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


def nccl_env_to_set(environ: Mapping[str, str], agent_environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """NCCL_ENV_DEFAULTS the user has not chosen, under either name torch reads (TORCH_NCCL_X, NCCL_X);
    the error handling as error_handling decides it (torch's elastic agent sets it for every worker)."""
    found = {name: value for name, value in NCCL_ENV_DEFAULTS.items()
             if name not in environ and name.replace("TORCH_", "", 1) not in environ}
    found[ERROR_HANDLING] = error_handling(environ, agent_environ)["value"]
    return found


ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
_OLD_ERROR_HANDLING = "NCCL_ASYNC_ERROR_HANDLING"  # torch's older name; TORCH_NCCL_X wins where both are set
ELASTIC_MARK = "TORCHELASTIC_RUN_ID"  # every worker of torch's elastic agent has it (torchrun, --workers)


def error_handling(environ: Mapping[str, str], agent_environ: Mapping[str, str] | None) -> dict[str, str]:
    """The TORCH_NCCL_ASYNC_ERROR_HANDLING the ranks run with, who chose it and why (meta.json's record).

    torch's elastic agent gives every worker os.getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    (local_elastic_agent.py, torch 2.3 to 2.13), so under torchrun and --workers a rank sees 1 whether
    or not the user chose it. The user's choice is told apart in the environment the agent itself was
    started with (agent_environ: its /proc/<pid>/environ; the agent passes a value set there on
    unchanged). Where that cannot be read, a 1 under the agent is taken for its default, and any
    other value for the user's.
    """
    under_agent = ELASTIC_MARK in environ
    chosen = environ.get(ERROR_HANDLING) if not under_agent else (
        agent_environ.get(ERROR_HANDLING) if agent_environ is not None
        else (None if environ.get(ERROR_HANDLING) == "1" else environ.get(ERROR_HANDLING)))
    if chosen is not None:
        return {"value": chosen, "set_by": "user", "why": f"{ERROR_HANDLING} was set before the run started"}
    if _OLD_ERROR_HANDLING in environ:
        return {"value": environ[_OLD_ERROR_HANDLING], "set_by": "user",
                "why": f"{_OLD_ERROR_HANDLING} was set before the run started"}
    why = "so that an NCCL error aborts the communicators and the rank reports it (torch's 3 ends the process)"
    if under_agent:
        why += "; torch's elastic agent had set 1 (tear down: the process ends with no report)"
    return {"value": NCCL_ENV_DEFAULTS[ERROR_HANDLING], "set_by": "nccl-bench", "why": why}


def agent_environ(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The environment torch's elastic agent (this rank's parent) was started with; None when no agent
    started this rank or its environment cannot be read (another user's process, no /proc)."""
    if ELASTIC_MARK not in environ:
        return None
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    pairs = (entry.decode("utf-8", "replace").partition("=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


def device_kind(backend: str) -> str:
    """Which device the buffers live on: NCCL works on CUDA tensors, the others here on CPU."""
    return "cuda" if backend == "nccl" else "cpu"


