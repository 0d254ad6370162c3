"""Start local workers through torch's own elastic launcher when no launcher started us.

`nccl-bench sweep --workers N` re-runs this same command line in N worker processes under
torch.distributed.launcher (the API behind torchrun, with a c10d rendezvous on localhost), so
the workers take exactly the torchrun code path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from typing import Iterator

from nccl_bench.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_VERDICT, RunFailedError
from nccl_bench.ranks import run_owner
from nccl_bench.ranks.faults import Interrupted
from nccl_bench.ranks.layout import CPU_DEFAULT_WORKERS

# How long the agent waits, after SIGTERM, before it SIGKILLs a worker that has not exited. A rank
# reports and writes meta.json within a few seconds of a SIGTERM (its roll call waits at most 3 s);
# one that cannot (stuck in a kernel) would otherwise hold the command for torch's 30 s.
WORKER_SHUTDOWN_S = 8
STOPPED_WATCH_POLL_S = 0.2
# Set in the workers' environment: the process that started them reports an interrupt, once.
LOCAL_WORKER_ENV = "NCCL_BENCH_LOCAL_WORKER"
# Set with --nccl-env: "K/N", the workers run the K-th of N variants, each in fresh ranks, all into one
# run folder (the first variant makes it; the later ones add to it).
VARIANT_ENV = "NCCL_BENCH_VARIANT"


def is_local_worker(environ=os.environ) -> bool:
    """These ranks were started as local workers (--workers), by a process that speaks for the run."""
    return bool(environ.get(LOCAL_WORKER_ENV))


def worker_variant(environ) -> tuple[int, int] | None:
    """(K, N) when these ranks run the K-th of N --nccl-env variants; None otherwise."""
    text = environ.get(VARIANT_ENV, "") if is_local_worker(environ) else ""
    number, _, count = text.partition("/")
    return (int(number), int(count)) if number.isdigit() and count.isdigit() else None
# Exit codes with which a worker has printed its own line (errors.py): the run's outcome, said once.
# A worker's 130 is not among them: a local worker leaves saying an interrupt to this process.
TOOL_EXIT_CODES = frozenset({EXIT_VERDICT, EXIT_BAD_INPUT, EXIT_RUN_FAILED})


def default_workers() -> tuple[int, str]:
    """One worker per visible GPU, or 2 CPU workers without CUDA; and a sentence saying so."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus:
        return gpus, f"{gpus} local workers, one per visible GPU"
    return CPU_DEFAULT_WORKERS, f"{CPU_DEFAULT_WORKERS} local CPU workers (gloo; no CUDA device)"


def shared_cores_note(workers: int, backend: str) -> list[str]:
    """A note when CPU ranks outnumber the cores (times then include waiting for a core); GPUs per NCCL
    worker are checked with the rest of the life cycle's preflight (preflight.check_local_workers)."""
    if backend == "nccl":
        return []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if workers > cores:
        return [f"{workers} workers share {cores} CPU core(s): ranks wait for a core, so times include that wait"]
    return []


def _shutdown_timeout(launch_config_type) -> dict[str, int]:
    """LaunchConfig's grace before SIGKILL, on the torch versions that have the field."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(launch_config_type)}
    return {"shutdown_timeout": WORKER_SHUTDOWN_S} if "shutdown_timeout" in names else {}


class _StoppedWorkerReaper:
    """Once a worker has exited, SIGKILL any other worker that is stopped (SIGSTOP, a debugger).

    A stopped process cannot act on the SIGTERM the agent sends when a worker fails, and the agent
    then waits 30 s (hard-coded in torch's process context) before its SIGKILL; the run has failed
    already, so the stopped worker is ended at once. Workers are this process's direct children.
    """

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="nccl-bench-reaper", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def _watch(self) -> None:
        seen: set[int] = set()
        while not self._stop.wait(STOPPED_WATCH_POLL_S):
            states = _child_states(os.getpid())
            live = {pid for pid, state in states.items() if state != "Z"}
            if seen - live:
                for pid, state in states.items():
                    if state == "T":
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
            seen |= live


def _child_states(parent: int) -> dict[int, str]:
    """pid -> Linux state letter of each direct child of `parent`."""
    found = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry.name}/stat", encoding="ascii") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent:
                    found[int(entry.name)] = fields[0]
    return found


def run_local_workers(nproc: int, module_args: list[str], claimant: str, monitor_interval_s: float = 0.1,
                      env: dict[str, str] | None = None) -> None:
    """Run `python -m nccl_bench <module_args>` in nproc ranks, with `env` added to their environment;
    raise RunFailedError if any fails.

    claimant: the token the run folder was claimed with, which the workers' rank 0 names to take it."""
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        _launch(nproc, module_args, claimant, monitor_interval_s)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _launch(nproc: int, module_args: list[str], claimant: str, monitor_interval_s: float) -> None:
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # The agent logs each step of a shutdown, and each failed worker as an error; the ranks report
    # what happened, in one line. Each
    # of its modules sets its own logger's level, so each is raised.
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("torch.distributed.elastic") and isinstance(logger, logging.Logger):
            logger.setLevel(logging.CRITICAL)

    # torchrun does the same: several ranks sharing the host's cores must not each spawn a
    # thread per core, or gloo's reductions contend and the numbers lie.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ[LOCAL_WORKER_ENV] = "1"
    os.environ[run_owner.RUN_CLAIM_ENV] = claimant
    os.environ[run_owner.PARENT_PID_ENV] = str(os.getpid())
    try:
        with private_temp_dir(), _StoppedWorkerReaper():  # the config's logs spec makes its folder at once
            config = LaunchConfig(
                min_nodes=1,
                max_nodes=1,
                nproc_per_node=nproc,
                run_id=f"nccl-bench-{uuid.uuid4().hex[:8]}",
                rdzv_backend="c10d",
                rdzv_endpoint="localhost:0",
                max_restarts=0,
                monitor_interval=monitor_interval_s,
                **_shutdown_timeout(LaunchConfig),
            )
            elastic_launch(config, sys.executable)("-u", "-m", "nccl_bench", *module_args)
    except SignalException as exc:  # Ctrl-C or SIGTERM here: the agent has stopped the ranks
        raise Interrupted(exc.sigval.name) from None
    except ChildFailedError as exc:
        raise worker_failure([failure.exitcode for failure in exc.failures.values()], nproc) from None


@contextlib.contextmanager
def private_temp_dir() -> Iterator[str]:
    """TMPDIR (and tempfile's cached answer) point at a folder of this run's own, removed at every end.

    Torch's agent makes a torchelastic_* log folder in the temporary folder for every launch and never
    removes it: dozens after an afternoon of runs. The workers inherit TMPDIR, so what they make goes too."""
    private = tempfile.mkdtemp(prefix="nccl-bench-agent-")
    saved_env, saved_cached = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = private, private
    os.environ[run_owner.AGENT_TMPDIR_ENV] = private
    try:
        yield private
    finally:
        tempfile.tempdir = saved_cached
        os.environ.pop(run_owner.AGENT_TMPDIR_ENV, None)
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(private, ignore_errors=True)


def worker_failure(exit_codes: list[int], nproc: int) -> RunFailedError:
    """The run's failure from its failed workers' exit codes: a code of the tool's own (a worker said
    why in its one line) is passed on without a second line; a worker killed by a signal or ended
    some other way leaves the line to this process."""
    own = set(exit_codes) & TOOL_EXIT_CODES
    if own:
        # A negative verdict of one rank is the run's, unless another rank failed outright.
        code = EXIT_RUN_FAILED if EXIT_RUN_FAILED in own or len(own) > 1 else own.pop()
        return RunFailedError("", code, quiet=True)
    codes = ", ".join(_exit_name(code) for code in sorted(set(exit_codes)))
    return RunFailedError(f"{len(exit_codes)} of {nproc} local worker(s) ended without a report ({codes})")


def _exit_name(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
