"""When a sweep stops early: SIGTERM/SIGINT/SIGHUP/SIGQUIT as an exception, and who is to blame for a failure.

A signal raises Interrupted at the next bytecode, except while signals are held: a row being
recorded, or the sweep's ending (its report and final meta.json), where it is only recorded. A
failed collective leads to a roll call in the launcher's store, so that one live rank names the
rank that died or froze instead of every rank printing its own connection error.
"""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Callable, Iterator

from nccl_bench.errors import EXIT_INTERRUPTED, RunFailedError
from nccl_bench.ranks import dist, native_output, roll_call
from nccl_bench.ranks.deadline import GRACE_S, STALL_MARK, DeadlineExceeded
from nccl_bench.ranks.positions import Positions

# After a collective fails, how long a rank waits for the others to check in: live ranks notice the
# same failure within moments (a closed connection, or the same --timeout); a dead or frozen one never.
FAILURE_ROLL_CALL_S = 3.0
TIMEOUT_MARK = "(--timeout "  # every failure this tool reports as a timeout carries it
# How long a rank whose collective failed, with the store gone, waits for a stop signal of its own:
# scancel signals every task at once, but a rank blocked in a collective sees the peer that left
# first (rank 0, whose exit takes the env:// store with it) as an error before its handler runs.
SIGNAL_GRACE_S = 1.0
# Signals that stop a run at its next safe point, its ending written: torch's elastic agent (torchrun,
# --workers) handles these four and passes the one it got on to the ranks.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


class Interrupted(BaseException):
    """A stop signal (SIGTERM, what torchrun sends its workers; SIGINT; SIGHUP; SIGQUIT): stop measuring,
    keep what is done.

    `began` is False when the signal came before the first meta.json: nothing was measured.
    """

    def __init__(self, signal_name: str, began: bool = True):
        super().__init__(signal_name)
        self.began = began


# How long a stop signal may wait for the main thread to run its handler before the signal's own
# thread ends the run for it. Python runs a handler only between bytecodes, so a main thread blocked
# in a C call (torch.cuda.synchronize(), a gloo wait on a frozen peer) runs it only when the call
# returns, and torchrun SIGKILLs 30 s after its SIGTERM (the agent's _shutdown(timeout=30)): the
# report, with the roll call after it (at most FAILURE_ROLL_CALL_S + GRACE_S + FAILURE_ROLL_CALL_S),
# must fit in what is left.
UNANSWERED_SIGNAL_S = 5.0


class _Signals:
    held = False
    pending: str | None = None  # the first signal that arrived while held
    handled = 0  # signals whose handler has run in the main thread
    # Called on the watcher's thread with a signal's name when the main thread has not run its
    # handler within UNANSWERED_SIGNAL_S (see unanswered_signals); None: nothing is done then.
    on_unanswered: Callable[[str], None] | None = None


_signals = _Signals()


def _on_signal(signum, frame) -> None:
    name = signal.Signals(signum).name
    _signals.handled += 1
    if _signals.held:
        _signals.pending = _signals.pending or name
        return
    raise Interrupted(name)


@contextlib.contextmanager
def signals_raise_interrupted() -> Iterator[None]:
    """Inside the block STOP_SIGNALS raise Interrupted (main thread only); then the old handlers."""
    _signals.held, _signals.pending = False, None
    previous = {}
    for signum in STOP_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, _on_signal)
        except ValueError:  # not the main thread
            pass
    try:
        with interrupts_unwrapped(), _SignalWatch() if previous else contextlib.nullcontext():
            yield
    finally:
        # Once the run's ending holds the signals, a signal changes nothing, and its handler stays: the
        # one line is printed after this block, and the launcher SIGTERMs the survivors as soon as one
        # rank leaves, which the default action would turn into a silent death (an empty stderr).
        for signum, handler in previous.items() if not _signals.held else ():
            signal.signal(signum, handler)


@contextlib.contextmanager
def unanswered_signals(callback: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, a stop signal whose handler the main thread has not run within
    UNANSWERED_SIGNAL_S is handed to callback(signal name) on a thread of its own: the main thread is
    blocked in a C call, and the callback reports and ends the run for it."""
    _signals.on_unanswered = callback
    try:
        yield
    finally:
        _signals.on_unanswered = None


class _SignalWatch:
    """A thread that learns of every stop signal as it arrives, whatever the main thread is doing.

    Python's C-level handler writes each signal's number to the wakeup descriptor (signal.set_wakeup_fd)
    at once, from whichever thread the kernel chose; the Python handler itself waits for the main
    thread's next bytecode. The watcher reads the descriptor and, when the handler has not run within
    UNANSWERED_SIGNAL_S, calls _signals.on_unanswered."""

    def __enter__(self) -> "_SignalWatch":
        import os
        import threading

        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._base, self._seen = _signals.handled, 0  # handlers run before this watch, stop signals read by it
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="nccl-bench-signals", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        import os

        signal.set_wakeup_fd(self._previous)
        os.close(self._write)  # the watcher reads end-of-file and returns; it closes its own end

    def _watch(self) -> None:
        import os

        with contextlib.suppress(OSError):
            while data := os.read(self._read, 64):
                for signum in data:
                    if signum in STOP_SIGNALS:
                        self._seen += 1
                        self._wait_for_handler(signal.Signals(signum).name, self._base + self._seen,
                                               _signals.on_unanswered)
        with contextlib.suppress(OSError):
            os.close(self._read)

    @staticmethod
    def _wait_for_handler(name: str, needed: int, callback: Callable[[str], None] | None) -> None:
        """callback(name) unless the handlers run since the watch began reach `needed` (one per stop signal
        read) within UNANSWERED_SIGNAL_S. Counted, not compared with the count as the byte was read: the
        main thread often runs the handler before this thread reads the byte. The callback is the one set
        as the signal came, not one a later step (or, in one process, a later run) sets meanwhile."""
        deadline = time.monotonic() + UNANSWERED_SIGNAL_S
        while time.monotonic() < deadline:
            if _signals.handled >= needed:
                return
            time.sleep(0.05)
        if callback is not None and _signals.handled < needed:
            callback(name)


@contextlib.contextmanager
def interrupts_unwrapped() -> Iterator[None]:
    """An Interrupted comes out of the block as itself, even when the code it hit wrapped it.

    A signal lands at any bytecode, and some code turns what it raises into another exception: Python
    3.11 turns an error inside a class body's ``__set_name__`` into a RuntimeError whose cause is the
    error, and importing torch's elastic agent runs such class bodies. Without this a Ctrl-C in that
    moment would be reported as a failure with a traceback instead of an interrupt.
    """
    try:
        yield
    except BaseException as exc:
        cause = interrupted_cause(exc)
        if cause is None or cause is exc:
            raise
        raise cause from None


def interrupted_cause(exc: BaseException) -> "Interrupted | None":
    """The Interrupted that `exc` is or was raised from (its __cause__ chain); else None.

    Only causes count: an exception raised while handling an Interrupted (its __context__), such as
    the SystemExit that reports it, is what the handler chose to raise.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, Interrupted):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__
    return None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """The block runs whole (a row lands in CSV, summary and table); a signal meanwhile is raised after."""
    _signals.held = True
    try:
        yield
    finally:
        _signals.held = False
    if _signals.pending:
        raise Interrupted(_signals.pending)


def pending_signal() -> str | None:
    """The stop signal that arrived while signals were held, if any (its name)."""
    return _signals.pending


def hold_signals() -> None:
    """From here on a signal is only recorded: the sweep is ending, and its report comes first.

    torchrun SIGTERMs the survivors as soon as it sees a rank die; that must not cut short the
    message that names the dead rank, nor leave meta.json saying "running".
    """
    _signals.held = True


def name_timeout(reason: str, timeout_s: float) -> str:
    """A backend's timeout wording, with the option that set it ("Timed out waiting 300ms ..." names none)."""
    lowered = reason.lower()
    if TIMEOUT_MARK not in reason and ("timed out" in lowered or "timeout" in lowered):  # gloo words it both ways
        return f"{reason} {TIMEOUT_MARK}{timeout_s:g} s)"
    return reason


def why_stopped(
    exc: BaseException, ctx: dist.DistContext, timeout_s: float, where: str, hostnames: list[str] | None,
    stood: Positions | None = None,
) -> BaseException:
    """What ended the sweep early, as the exception to raise: Interrupted, or a RunFailedError that
    names the rank that did not answer (the lowest live rank prints it; the others stay quiet, and
    return once that rank has left, or after FAILURE_ROLL_CALL_S: a live rank notices the failure
    within moments, and one blocked on this rank notices only when this rank exits and closes its
    connections, so waiting longer would only delay it).

    stood: this rank's points; it says in the store where it stood before it says it is leaving, and
    a stall's line (said by the reporter, or written by rank 0 into meta.json) adds where every rank
    stood and what torch's flight recorder holds.
    """
    if stood is not None:
        stood.publish(ctx)
    stop, reporter = _failure(exc, ctx, timeout_s, where, hostnames)
    if isinstance(stop, RunFailedError) and _is_stall(str(stop)) and stood is not None and (
            not stop.quiet or ctx.rank == 0):
        stop = _with_standings(stop, stood, ctx)
    if isinstance(stop, RunFailedError) and stop.quiet:
        roll_call.await_leaving(ctx, reporter, FAILURE_ROLL_CALL_S)
    return stop


def _is_stall(line: str) -> bool:
    """The failure is a stall: a rank's deadline, or the backend's own timeout, ran out."""
    return STALL_MARK in line or TIMEOUT_MARK in line


def _with_standings(stop: RunFailedError, stood: Positions, ctx: dist.DistContext) -> RunFailedError:
    """The stall's line with where every rank stood and the flight recorder's summary after it."""
    ranks, recorder = stood.gather(ctx)
    told = RunFailedError(f"{stop}; where the ranks stood: {ranks}; {recorder}", stop.exit_code, stop.quiet)
    told.details, told.exit_at_once = stop.details, stop.exit_at_once
    return told


def _failure(
    exc: BaseException, ctx: dist.DistContext, timeout_s: float, where: str, hostnames: list[str] | None
) -> tuple[BaseException, int]:
    """why_stopped's answer, and the rank that reports it (the lowest live rank).

    Each failing rank leaves its failure line in the store. A collective timeout is the root cause
    whatever the others saw after it (the timed-out rank's exit closes their connections, and the
    launcher then SIGTERMs them), so a rank that saw only such a consequence reports the timeout.
    """
    if isinstance(exc, Interrupted):
        signalled: Interrupted | None = exc
        own = None
    else:  # the signal may have come together with the error
        signalled = Interrupted(_signals.pending) if _signals.pending else None
        own = name_timeout(native_output.backend_error_text(exc), timeout_s)
        roll_call.mark_leaving(ctx, f"{where} failed on rank {ctx.rank}: {own}")
        if isinstance(exc, DeadlineExceeded):
            roll_call.mark_after_abort(ctx, roll_call.CAME_BACK if exc.came_back else roll_call.STUCK)
    if signalled is not None and own is None:
        roll_call.mark_leaving(ctx)
        if not _peer_failures(ctx) and all(what == "running" for what in roll_call.local_peer_states(ctx).values()):
            return signalled, ctx.rank
    answered = roll_call.roll_call(ctx, min(FAILURE_ROLL_CALL_S, timeout_s))
    local = roll_call.local_peer_states(ctx)
    crashed = {rank: what for rank, what in local.items() if what != "running"}
    present, silent = answered if answered is not None else ([], sorted(crashed))
    # A live rank on this host that did not check in is blocked waiting for us, not at fault.
    missing = [r for r in silent if local.get(r) != "running"]
    live = sorted(set(present) | {r for r, what in local.items() if what == "running"} | {ctx.rank})
    quiet = live[0] != ctx.rank
    peers = _causes(ctx)
    if isinstance(exc, DeadlineExceeded) and exc.came_back:
        own_cause = None  # released by its abort: this rank waited on a peer (the stall, if any, is theirs)
    else:
        own_cause = own
    # The rank whose deadline ran out and that never came back is the one that stalled; a backend's
    # timeout (gloo's) only says that someone did; anything else (a closed connection, a SIGTERM, a
    # rank released by its abort) is a consequence.
    for mark in (STALL_MARK, TIMEOUT_MARK):
        found = [line for line in peers.values() if mark in line]
        if found and (own_cause is None or mark not in own_cause):
            return RunFailedError(found[0], quiet=quiet), live[0]
    if own is not None and not missing:
        interrupted = _interrupted_meanwhile(ctx, answered is None)
        if interrupted is not None:  # the error was the run being stopped: one "interrupted" line, rank 0's
            return interrupted, live[0]
    # torchrun stops the survivors of a dead rank with SIGTERM, often before their next collective
    # would have failed: with a dead peer on this host that is a failure, and the peer is named.
    reason = own if own is not None else f"{signalled} from the launcher"
    if not missing:
        if own_cause is None and peers:  # SIGTERMed (or released) because a peer failed: its failure is the news
            return RunFailedError(next(iter(peers.values())), quiet=quiet), live[0]
        return RunFailedError(f"{where} failed on rank {ctx.rank}: {reason}", quiet=quiet), live[0]
    names = ", ".join(
        f"rank {r}" + (f" on host {hostnames[r]}" if hostnames else "") + (f" ({crashed[r]})" if r in crashed else "")
        for r in missing
    )
    verb = "does" if len(missing) == 1 else "do"
    return RunFailedError(f"{where} failed: {names} {verb} not answer; rank {ctx.rank} saw: {reason}",
                          quiet=quiet), live[0]


def _interrupted_meanwhile(ctx: dist.DistContext, store_gone: bool) -> Interrupted | None:
    """A stop signal of this rank's own that came with (or just after) its error, while the whole run
    was being stopped: a peer left on a signal, or the store went (with rank 0, on its signal). Then
    the error is the signal's consequence, not a failure each rank would print (three lines after one
    scancel). A peer that failed on its own (torchrun then SIGTERMs the rest) left its line instead."""
    left_on_signal = roll_call.LEFT_ON_SIGNAL in roll_call.leaving_reasons(ctx).values()
    if not (left_on_signal or store_gone):
        return None
    deadline = time.monotonic() + (SIGNAL_GRACE_S if store_gone else 0.0)
    while _signals.pending is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if _signals.pending is None:
        return None
    roll_call.mark_leaving(ctx, replace=True)  # peers must not report this rank's error as the news
    return Interrupted(_signals.pending)


def _causes(ctx: dist.DistContext) -> dict[int, str]:
    """Failure lines of peers that may be the cause: every peer's but those whose deadline ran out
    and who came back from the abort (they were released from a wait on someone else).

    Whichever timeout fires first, the answer is the same: on NCCL every rank's deadline runs out
    before the group's own timeout (--timeout + 14 s, ranks/dist.py) and ncclCommAbort releases the
    ranks that were waiting; on gloo the waiting ranks' own timeout comes first. Waits for stalled
    peers to say whether they came back: up to their grace period and a roll call.
    """
    peers = _peer_failures(ctx)
    stalled = [rank for rank, line in peers.items() if STALL_MARK in line]
    states = roll_call.after_abort(ctx, stalled, GRACE_S + FAILURE_ROLL_CALL_S) if stalled else {}
    return {rank: line for rank, line in peers.items() if states.get(rank) != roll_call.CAME_BACK}


def _peer_failures(ctx: dist.DistContext) -> dict[int, str]:
    """Failure lines other ranks left, lowest rank first (ranks that left on a signal are not in it)."""
    reasons = roll_call.leaving_reasons(ctx)
    return {rank: reasons[rank] for rank in sorted(reasons) if reasons[rank] != roll_call.LEFT_ON_SIGNAL}


def record_stall(exc: BaseException, ctx: dist.DistContext, stood: Positions | None = None) -> None:
    """The deadline ran out: say so in the store at once, so a peer's roll call finds the stalled rank
    (and where it stood, said first)."""
    if stood is not None:
        stood.publish(ctx)
    roll_call.mark_leaving(ctx, f"{exc.where} failed on rank {ctx.rank}: {exc}")


def unanswered(signal_name: str, ctx: dist.DistContext, timeout_s: float, where: str, hostnames: list[str],
               speaks: bool, stood: Positions | None = None) -> RunFailedError:
    """The ending of a rank whose main thread did not answer a stop signal (blocked in a C call), as
    the failure its deadline's thread would report: a frozen or dead peer named (exit 3), else the
    interrupt (exit 130, said by the rank that speaks for the run)."""
    stop = why_stopped(Interrupted(signal_name), ctx, timeout_s, where, hostnames, stood)
    if isinstance(stop, RunFailedError):
        return stop
    return RunFailedError(f"interrupted by {signal_name}; results measured so far are kept",
                          exit_code=EXIT_INTERRUPTED, quiet=not speaks)


def abandoned(exc: BaseException, ctx: dist.DistContext, timeout_s: float, hostnames: list[str],
              stood: Positions | None = None) -> RunFailedError:
    """The failure of a rank whose main thread will not come back (its deadline ends the process),
    mapped as any failure is: a stopped or dead peer named; printed by the lowest live rank only."""
    stop = why_stopped(exc, ctx, timeout_s, exc.where, hostnames, stood)
    return stop if isinstance(stop, RunFailedError) else RunFailedError(f"{exc.where} failed on rank {ctx.rank}: {exc}")
