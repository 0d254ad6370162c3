"""A CPU-side deadline on every step that waits on other ranks (a sweep or replay point's, a doctor
measurement's, a set-up step's): past --timeout without progress, abort every process group.

Why torch's own timeout is not enough on NCCL (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, 2.11):
- the watchdog thread sees a collective older than the group's timeout, then sleeps
  4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (15 s by default, so a minute) for the flight recorder's dump,
  and with TORCH_NCCL_ASYNC_ERROR_HANDLING=3 (the default, SkipCleanUp) takes the process down (SIGABRT)
  while the main thread still sits in torch.cuda.synchronize(): no report, meta.json left "running";
- it never sees the replay of a captured CUDA graph (captured work is not enqueued to it), and
  TORCH_NCCL_BLOCKING_WAIT=1 only removes it: a synchronous collective returns no Work to Python
  (distributed_c10d.py passes opts.asyncOp and waits only on a Work the backend returns; NCCL's is
  None since torch 2.8), so nothing waits on the blocking-wait timeout and the rank's only wait
  left is torch.cuda.synchronize(), which no NCCL timeout ends.
So the rank keeps its own clock. Each step (the op tried once, warm-up, a calibration block, a timed
sample, a cross-rank reduction, the check) must end within --timeout + MARGIN_S. Past that every
process group of the rank is aborted through torch's API (dist.abort_all_groups -> ncclCommAbort, which
makes waiting NCCL kernels return), and the main thread, back from its wait, raises DeadlineExceeded
(came_back) at its next step, so the sweep's usual failure path reports it; the rank whose main thread
never comes back is the one the failure names (ranks/faults.py). gloo has no abort (its Backend.abort
is a no-op) but ends its own stalled ops at --timeout. A rank stuck where no abort reaches (a kernel
that never ends, a wait outside any collective) is handed after GRACE_S to `on_stuck`, which ends the
process with the report.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

# After --timeout: on gloo the backend's own timeout error (which names the peer operation) wins the race.
MARGIN_S = 1.0
# After the abort: how long the main thread has to come back before the process is ended for it.
GRACE_S = 3.0
STALL_MARK = "no progress for more than"  # in every DeadlineExceeded message, so peers can tell one


class DeadlineExceeded(RuntimeError):
    """A step of a point made no progress for --timeout (+ MARGIN_S); the process group was aborted.

    came_back: the rank's main thread returned from the aborted step. Every rank's deadline runs out
    in a stall (NCCL's own timeout comes 14 s later, ranks/dist.py), and the abort releases the ranks
    that only waited on a peer; the rank whose main thread never comes back is the one that stalled.
    """

    def __init__(self, where: str, timeout_s: float, came_back: bool = False):
        super().__init__(f"{STALL_MARK} {timeout_s:g} s (--timeout {timeout_s:g} s)")
        self.where = where
        self.timeout_s = timeout_s
        self.came_back = came_back


class Deadline:
    """One watchdog thread per rank. renew() at the start of every step, disarm() when a point ends.

    abort(exc): called once, on a thread of its own, when a step runs out of time.
    on_stuck: called on the watchdog thread with the DeadlineExceeded when the main thread has not come
    back GRACE_S after the abort; it is expected to end the process (None: only abort).
    """

    def __init__(self, timeout_s: float, abort: Callable[[DeadlineExceeded], None],
                 on_stuck: Callable[[DeadlineExceeded], None] | None = None,
                 margin_s: float = MARGIN_S, grace_s: float = GRACE_S, clock: Callable[[], float] = time.monotonic):
        self.timeout_s = timeout_s
        self._abort, self._on_stuck = abort, on_stuck
        self._budget_s, self._grace_s, self._clock = timeout_s + margin_s, grace_s, clock
        self._cond = threading.Condition()
        self._due: float | None = None
        self._where = "the sweep"
        self._closed = False
        self._came_back = False
        self.expired: str | None = None  # the step that ran out of time, once it has
        self._thread = threading.Thread(target=self._watch, name="nccl-bench-deadline", daemon=True)

    def __enter__(self) -> Deadline:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def check(self) -> None:
        """Raise DeadlineExceeded if a step ran out of time (the main thread is back: no need to end it)."""
        if self.expired is not None:
            with self._cond:
                self._came_back = True
                self._cond.notify_all()
            raise DeadlineExceeded(self.expired, self.timeout_s, came_back=True)

    def renew(self, where: str | None = None) -> None:
        """A step starts: it has --timeout (+ margin) from now. Raises if an earlier step ran out."""
        self.check()
        with self._cond:
            if where is not None:
                self._where = where
            self._due = self._clock() + self._budget_s
            self._cond.notify_all()

    def disarm(self) -> None:
        """The point is over (nothing of ours is waiting on the process group until the next renew)."""
        self.check()
        with self._cond:
            self._due = None

    def _watch(self) -> None:
        with self._cond:
            while True:
                if self._closed:
                    return
                if self._due is None:
                    self._cond.wait()
                    continue
                left = self._due - self._clock()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self.expired = self._where
                break
        threading.Thread(target=self._abort_quietly, name="nccl-bench-abort", daemon=True).start()
        with self._cond:
            end = self._clock() + self._grace_s
            while not (self._closed or self._came_back):
                left = end - self._clock()
                if left <= 0:
                    break
                self._cond.wait(left)
            stuck = not (self._closed or self._came_back)
        if stuck and self._on_stuck is not None:
            self._on_stuck(DeadlineExceeded(self.expired, self.timeout_s))

    def _abort_quietly(self) -> None:
        try:
            self._abort(DeadlineExceeded(self.expired, self.timeout_s))
        except Exception:  # an abort that fails leaves the grace period and on_stuck to end the rank
            pass
