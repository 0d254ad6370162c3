"""The one seam through which tests plant faults in a real run: chosen once, at the start of a run.

A run asks `fault_seam(os.environ)` for its hooks before measuring and calls them at fixed places
(a point starts; a point's output was checked). Normal runs get `NoFaults`, whose hooks do nothing,
so the measured path holds no test conditionals. NCCL_BENCH_FAULT is never set in normal use.

Grammar of NCCL_BENCH_FAULT:
- `corrupt`: one checked element is flipped on the rank that holds the first expected segment, so
  the data check must count it.
- `stall[:RANK[:POINT[:SECONDS]]]`: RANK (default 0) blocks at the start of its POINT-th point
  (default 1, counting from 0) in a wait outside any collective (a sleep, in native code, that no
  abort reaches), as a rank does whose GPU or host stops answering; its peers stall in that point's
  first collective. With SECONDS the rank wakes up and goes on (a peer held up past --timeout).
- `stall-gpu[:RANK[:POINT]]` (NCCL): the same, but the rank's CUDA stream spins
  (torch.cuda._sleep) and the rank waits in torch.cuda.synchronize().
- `stall-behind-gpu[:RANK[:POINT]]` (NCCL): the rank's current stream spins (torch.cuda._sleep) and
  the rank goes on, so the point's first collective is enqueued behind the spin (NCCL's stream waits
  on the current one): the work sits unfinished in torch's watchdog list, as a collective whose GPU
  stopped does, and the rank waits for it at its next synchronisation.
- `crash[:RANK[:POINT]]`: RANK's process is killed (SIGKILL) at the start of its POINT-th point, in
  the first attempt of an elastic job only (TORCHELASTIC_RESTART_COUNT 0), as a worker lost once:
  torchrun --max-restarts starts the job again, and the restarted attempt goes on.
- `killed[:RANK]`: RANK's process is killed (SIGKILL) once its run has ended (the final meta.json
  written, the report printed), as by an OOM killer or a scheduler during the teardown.
- `outlive[:RANK]`: RANK says its run's last lines (the observer's `finished`, after the final
  meta.json) only once every other rank on its host has ended (at most OUTLIVE_WAIT_S), as a rank 0
  slowed by a loaded host or terminal would: a launcher that ends the whole job at the first
  non-zero exit (mpirun) would kill it before those lines if another rank could exit non-zero first.
- `crash-set-up[:RANK]`: RANK's process is killed (SIGKILL) during set-up, once it has registered in
  the rendezvous store and before its process group is made, as a host lost while the job starts.
- `stall-set-up[:RANK]`: RANK blocks at the same place in native code (a store client of its own
  waits for a key nobody sets: neither an abort nor a signal handler reaches it, since Python runs a
  handler only when the main thread returns to bytecode), as a rank stuck while its process group
  connects; it first sets STALLED_KEY, so a test knows it is blocked. Only its set-up deadline, or a
  stop signal's own thread (ranks/faults.py), ends it.

- `late:RANK:MICROSECONDS`: RANK sleeps at least MICROSECONDS (time.sleep: the kernel's timer slack adds
  tens more) before every timed op of every point, after its previous op returned and before its
  arrival is stamped, as a rank whose host is slow to issue its work: it arrives late at every op, and
  its peers wait for it inside the op. Per op, not per sample, so that a sample's median arrival (the
  statistic the late-rank rule reads, units/arrivals.py) sees it at every size and trial count.

NCCL_BENCH_FAULT_LATE_BACKEND=SECONDS (gloo) gives the process group its own timeout SECONDS after the
rank's deadline (--timeout + deadline.MARGIN_S + SECONDS) instead of at --timeout: NCCL's order, where
every rank's deadline runs out first (NCCL's group has --timeout + 14 s, ranks/dist.py). gloo cannot be
aborted (its Backend.abort does nothing), so its late timeout stands in for the abort releasing the
ranks that wait on a stalled peer: SECONDS must be shorter than deadline.GRACE_S, or they would count
as stuck too.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from nccl_bench.ranks.run_owner import attempt

FAULT_ENV = "NCCL_BENCH_FAULT"
LATE_BACKEND_ENV = "NCCL_BENCH_FAULT_LATE_BACKEND"
# A planted stall waits this long (a day): far past any --timeout, so only the deadline ends it.
STALL_S = 86_400
# Set (in the rendezvous store, unprefixed) by a stall-set-up rank just before it blocks: "stalled/<rank>".
STALLED_KEY = "nccl_bench/fault/stalled"
# torch.cuda._sleep spins this many GPU cycles (over an hour at 2 GHz): a stream that never drains.
STALL_GPU_CYCLES = 10**13
# The longest an outlive rank waits for the other ranks on its host to end: a rank that never ends
# must not hold the test past its own timeout.
OUTLIVE_WAIT_S = 30.0
OUTLIVE_POLL_S = 0.1
KINDS = ("corrupt", "stall", "stall-gpu", "stall-behind-gpu", "killed", "outlive", "crash", "crash-set-up",
         "stall-set-up", "late")


class NoFaults:
    """The hooks of a normal run: nothing happens."""

    def point_starts(self, rank: int, index: int) -> None:
        """Called on every rank as its index-th point (or measurement) begins."""

    def output_checked(self, recv, first_index: int | None, rank: int, holder: int) -> None:
        """Called after a point's output has landed in `recv` and before it is counted; `first_index`
        is the first element the check verifies (None: nothing to verify), `holder` the rank holding it."""

    def last_lines_due(self, rank: int, others_running: Callable[[], bool]) -> None:
        """Called on every rank after its final meta.json, before the observer says the run's last lines;
        `others_running()`: whether another rank on this host is still running."""

    def run_ended(self, rank: int) -> None:
        """Called on every rank after its run's ending (final meta.json, report)."""

    def joined(self, rank: int) -> None:
        """Called on every rank once it has registered in the rendezvous store (ranks/set_up.py)."""

    def pause(self, rank: int) -> Callable[[], None] | None:
        """What this rank runs before every timed op; None: nothing (the timing loop then calls nothing)."""
        return None


@dataclass(frozen=True)
class Fault(NoFaults):
    """A planted fault (see the module docstring for its grammar)."""

    kind: str
    rank: int = 0
    point: int = 1
    seconds: float = STALL_S  # stall: how long (a short one ends and lets the rank go on); late: the delay per op

    def joined(self, rank: int) -> None:
        if self.kind == "crash-set-up" and rank == self.rank:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "stall-set-up" and rank == self.rank:
            _stall_in_native_code(rank, self.seconds)

    def pause(self, rank: int) -> Callable[[], None] | None:
        if self.kind == "late" and rank == self.rank:
            delay_s = self.seconds
            return lambda: time.sleep(delay_s)
        return None

    def point_starts(self, rank: int, index: int) -> None:
        if self.kind in ("stall", "stall-gpu", "stall-behind-gpu") and (self.rank, self.point) == (rank, index):
            stall(self)
        if self.kind == "crash" and (self.rank, self.point) == (rank, index) and attempt(os.environ) == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    def output_checked(self, recv, first_index: int | None, rank: int, holder: int) -> None:
        if self.kind == "corrupt" and first_index is not None and rank == holder:
            recv[first_index] += 1

    def last_lines_due(self, rank: int, others_running: Callable[[], bool]) -> None:
        if self.kind == "outlive" and rank == self.rank:
            for _ in range(round(OUTLIVE_WAIT_S / OUTLIVE_POLL_S)):  # counted polls: a bound, no clock to read
                if not others_running():
                    return
                time.sleep(OUTLIVE_POLL_S)

    def run_ended(self, rank: int) -> None:
        if self.kind == "killed" and rank == self.rank:
            os.kill(os.getpid(), signal.SIGKILL)


def fault_seam(environ: Mapping[str, str]) -> NoFaults:
    """The hooks this run uses: NoFaults, or the Fault that NCCL_BENCH_FAULT plants."""
    return planted_fault(environ) or NoFaults()


def planted_fault(environ: Mapping[str, str]) -> Fault | None:
    raw = environ.get(FAULT_ENV, "").strip()
    if not raw:
        return None
    kind, *fields = raw.split(":")
    try:
        if kind not in KINDS or len(fields) > 3 or (kind == "late" and len(fields) != 2):
            raise ValueError
        if kind == "late":
            rank, micros = int(fields[0]), float(fields[1])
            if rank < 0 or not 0 < micros < math.inf:
                raise ValueError
            return Fault(kind, rank, seconds=micros * 1e-6)
        numbers = [int(f) for f in fields[:2]] + [float(f) for f in fields[2:]]
    except ValueError:
        raise ValueError(f"{FAULT_ENV}={raw!r}: expected corrupt, stall[:RANK[:POINT[:SECONDS]]], "
                         "stall-gpu|stall-behind-gpu[:RANK[:POINT]], crash[:RANK[:POINT]], killed[:RANK], "
                         "outlive[:RANK], crash-set-up|stall-set-up[:RANK] or late:RANK:MICROSECONDS") from None
    return Fault(kind, *numbers)


def late_backend_s(environ: Mapping[str, str]) -> float | None:
    """How long after the rank's deadline the (gloo) group's own timeout comes; None: at --timeout."""
    raw = environ.get(LATE_BACKEND_ENV, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{LATE_BACKEND_ENV}={raw!r}: expected seconds") from None


def stall(fault: Fault) -> None:
    """Block this rank (stall-behind-gpu: only its stream) as the planted fault says, in native code
    (the GIL released, as a real stall)."""
    if fault.kind in ("stall-gpu", "stall-behind-gpu"):
        import torch

        torch.cuda._sleep(STALL_GPU_CYCLES)
        if fault.kind == "stall-gpu":
            torch.cuda.synchronize()
    else:
        time.sleep(fault.seconds)  # not a store wait: the store's client is shared with the deadline's report


def _stall_in_native_code(rank: int, seconds: float) -> None:
    """Block the main thread in a C++ store wait for `seconds` (the GIL released, no bytecode run), on
    a store client of its own: the rank's own client stays free for its deadline's report."""
    import datetime as _dt

    import torch.distributed as tdist

    client = tdist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, is_master=False,
                            timeout=_dt.timedelta(seconds=seconds), wait_for_workers=False)
    client.set(f"{STALLED_KEY}/{rank}", "1")
    client.wait([f"{STALLED_KEY}/never"])
