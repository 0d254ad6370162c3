"""Whose run this rank belongs to: the token that claims its run folder, the elastic attempt it is, and
the parent whose death ends it.

A run folder is claimed once (results/run_folder.claim_run_dir) with a token that every process of the
run can name: the launcher-less CLI makes one and hands it to its workers (RUN_CLAIM_ENV); under torchrun
every attempt of one job has the same agent (this rank's parent) and run id, so a restarted attempt
takes the folder its first attempt claimed (and rendezvouses under keys of its own: rendezvous). A
rank whose parent (the agent that started it: torchrun, or the CLI of --workers, which runs torch's
agent in-process) dies would otherwise go on measuring, holding the GPUs and the fabric from the next
job; ParentWatch stops it as a SIGTERM would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import threading
import uuid
from typing import Mapping

# Every variable this tool sets for its ranks starts so (these below, ranks/launch.py's): --nccl-env
# refuses the prefix (sweep/sweep_config.py), so a knob never rewires the run itself.
TOOL_ENV_PREFIX = "NCCL_BENCH_"
# Set by the launcher-less CLI in its workers' environment: the token it claimed the run folder with.
RUN_CLAIM_ENV = "NCCL_BENCH_RUN_CLAIM"
# Set by the launcher-less CLI: its pid, the parent its workers must have (one that died before a worker
# looked would leave the worker adopted, with a parent that never changes).
PARENT_PID_ENV = "NCCL_BENCH_PARENT_PID"
# Set by the launcher-less CLI: the temporary folder of its own it gives torch's agent (ranks/launch.py),
# which the CLI removes at every end but its own SIGKILL; then the ranks it orphaned remove it.
AGENT_TMPDIR_ENV = "NCCL_BENCH_AGENT_TMPDIR"
ATTEMPT_ENV = "TORCHELASTIC_RESTART_COUNT"  # torch's elastic agent: 0, then 1, 2, ... after each restart
# How often a rank looks at its parent: an orphan ends within about this plus its own ending (a few s).
PARENT_POLL_S = 0.5


def new_claimant() -> str:
    """A token no other run has: this process, this host, and a random part (pids are reused)."""
    return f"pid {os.getpid()} on {socket.gethostname()}, {uuid.uuid4().hex[:8]}"


def claimant(environ: Mapping[str, str]) -> str:
    """This rank's run's token: the CLI's, else every attempt of a torchrun job's, else one of its own."""
    given = environ.get(RUN_CLAIM_ENV)
    if given:
        return given
    if "TORCHELASTIC_RUN_ID" in environ:
        return f"torchrun pid {os.getppid()} on {socket.gethostname()}, run {environ['TORCHELASTIC_RUN_ID']}"
    return new_claimant()


def attempt(environ: Mapping[str, str]) -> int:
    """Which attempt of an elastic job this is: 0 for the first (and outside torch's agent)."""
    with contextlib.suppress(ValueError):
        return max(0, int(environ.get(ATTEMPT_ENV, "0")))
    return 0


def rendezvous(environ: Mapping[str, str], world_size: int, timeout) -> dict:
    """init_process_group's rendezvous arguments: env://, except in a restarted attempt on the store of
    torch's agent (torchrun's default), which keeps every key of the attempts before: gloo's ranks would
    read the addresses of the dead attempt's peers ("Connection refused"). There the attempt gets keys
    of its own (a prefix naming it) on the same store."""
    if attempt(environ) == 0 or environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return {"init_method": "env://"}
    import torch.distributed as dist

    agent_store = dist.TCPStore(environ["MASTER_ADDR"], int(environ["MASTER_PORT"]), world_size, is_master=False,
                                timeout=timeout)
    return {"store": dist.PrefixStore(f"nccl-bench/attempt_{attempt(environ)}", agent_store)}


class ParentWatch:
    """While open, SIGTERM this process once its parent is gone: the life cycle takes it as any stop
    signal (the rows kept, meta.json "interrupted"), and the agent's peers get the same from theirs.

    A thread polling os.getppid(), not prctl(PR_SET_PDEATHSIG): that fires when the *thread* that
    forked us ends, and the agent is free to start workers from any thread.
    """

    def __init__(self, environ: Mapping[str, str], launcher: str = "torchrun", poll_s: float = PARENT_POLL_S):
        # A launcher's process is the parent (torch's agent, srun's step daemon, Open MPI's daemon); RANK
        # and WORLD_SIZE set by hand name none, and a shell that started the rank under nohup may go.
        self.enabled = launcher != "torchrun" or "TORCHELASTIC_RUN_ID" in environ or PARENT_PID_ENV in environ
        expected = environ.get(PARENT_PID_ENV, "")
        self.parent = int(expected) if expected.isdigit() else os.getppid()
        self._poll_s = poll_s
        self.why: str | None = None  # set once the parent is gone: what meta.json says stopped the run
        self._agent_tmpdir = environ.get(AGENT_TMPDIR_ENV)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="nccl-bench-parent-watch", daemon=True)

    def __enter__(self) -> "ParentWatch":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self.why is not None and self._agent_tmpdir:
            shutil.rmtree(self._agent_tmpdir, ignore_errors=True)

    def gone(self) -> bool:
        """The parent is gone (asked at once: a peer that saw it first may have ended this rank's collective)."""
        if self.enabled and os.getppid() != self.parent:
            self.why = f"the process that started this rank (pid {self.parent}) died"
        return self.why is not None

    def _watch(self) -> None:
        while True:
            if self.gone():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            if self._stop.wait(self._poll_s):
                return
