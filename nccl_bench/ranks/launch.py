"""Start local workers through torch's own elastic launcher when no launcher started us.

`nccl-bench sweep --workers N` re-runs this same command line in N worker processes under
torch.distributed.launcher (the API behind torchrun, with a c10d rendezvous on localhost), so
the workers take exactly the torchrun code path.
"""

from __future__ import annotations

import os
import sys
import uuid

from nccl_bench.errors import RunFailedError, UserInputError
from nccl_bench.ranks.faults import Interrupted

CPU_DEFAULT_WORKERS = 2  # the smallest world in which every collective really communicates
# Set in the workers' environment: the process that started them reports an interrupt, once.
LOCAL_WORKER_ENV = "NCCL_BENCH_LOCAL_WORKER"


def default_workers() -> tuple[int, str]:
    """One worker per visible GPU, or 2 CPU workers without CUDA; and a sentence saying so."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus:
        return gpus, f"{gpus} local workers, one per visible GPU"
    return CPU_DEFAULT_WORKERS, f"{CPU_DEFAULT_WORKERS} local CPU workers (gloo; no CUDA device)"


def check_workers(workers: int, backend: str) -> list[str]:
    """Refuse more NCCL ranks than GPUs (each rank needs its own); note CPU ranks beyond the cores."""
    if backend == "nccl":
        import torch

        gpus = torch.cuda.device_count()
        if workers > gpus:
            raise UserInputError("--workers", f"{workers} NCCL ranks need {workers} GPUs; {gpus} visible here")
        return []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if workers > cores:
        return [
            f"{workers} workers share {cores} CPU core(s): ranks wait for a core, so times include that wait"
        ]
    return []


def run_local_workers(nproc: int, module_args: list[str], monitor_interval_s: float = 0.1) -> None:
    """Run `python -m nccl_bench <module_args>` in nproc ranks; raise RunFailedError if any fails."""
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # The agent logs each step of a shutdown as a warning; the ranks report what happened. Each
    # of its modules sets its own logger's level, so each is raised.
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("torch.distributed.elastic") and isinstance(logger, logging.Logger):
            logger.setLevel(logging.ERROR)

    # torchrun does the same: several ranks sharing the host's cores must not each spawn a
    # thread per core, or gloo's reductions contend and the numbers lie.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ[LOCAL_WORKER_ENV] = "1"
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=f"nccl-bench-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=monitor_interval_s,
    )
    try:
        elastic_launch(config, sys.executable)("-u", "-m", "nccl_bench", *module_args)
    except SignalException as exc:  # Ctrl-C or SIGTERM here: the agent has stopped the ranks
        raise Interrupted(exc.sigval.name) from None
    except ChildFailedError as exc:
        codes = sorted({failure.exitcode for failure in exc.failures.values()})
        raise RunFailedError(
            f"{len(exc.failures)} of {nproc} local worker(s) failed (exit code {', '.join(map(str, codes))})",
            codes[0] if codes and codes[0] > 0 else 1,
        ) from None
