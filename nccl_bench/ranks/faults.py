"""When a sweep stops early: SIGTERM/SIGINT as an exception, and who is to blame for a failure.

A signal raises Interrupted at the next bytecode, except while signals are held: a row being
recorded, or the sweep's ending (its report and final meta.json), where it is only recorded. A
failed collective leads to a roll call in the launcher's store, so that one live rank names the
rank that died or froze instead of every rank printing its own connection error.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import dist

# After a collective fails, how long a rank waits for the others to check in: live ranks notice the
# same failure within moments (a closed connection, or the same --timeout); a dead or frozen one never.
FAILURE_ROLL_CALL_S = 3.0


class Interrupted(BaseException):
    """SIGTERM (what torchrun sends its workers) or SIGINT: stop measuring, keep what is done.

    `began` is False when the signal came before the first meta.json: nothing was measured.
    """

    def __init__(self, signal_name: str, began: bool = True):
        super().__init__(signal_name)
        self.began = began


class _Signals:
    held = False
    pending: str | None = None  # the first signal that arrived while held


_signals = _Signals()


def _on_signal(signum, frame) -> None:
    name = signal.Signals(signum).name
    if _signals.held:
        _signals.pending = _signals.pending or name
        return
    raise Interrupted(name)


@contextlib.contextmanager
def signals_raise_interrupted() -> Iterator[None]:
    """Inside the block SIGTERM and SIGINT raise Interrupted (main thread only); then the old handlers."""
    _signals.held, _signals.pending = False, None
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[signum] = signal.signal(signum, _on_signal)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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


def hold_signals() -> None:
    """From here on a signal is only recorded: the sweep is ending, and its report comes first.

    torchrun SIGTERMs the survivors as soon as it sees a rank die; that must not cut short the
    message that names the dead rank, nor leave meta.json saying "running".
    """
    _signals.held = True


def why_stopped(
    exc: BaseException, ctx: dist.DistContext, timeout_s: float, where: str, hostnames: list[str] | None
) -> BaseException:
    """What ended the sweep early, as the exception to raise: Interrupted, or a RunFailedError that
    names the rank that did not answer (the lowest live rank prints it; the others stay quiet)."""
    if isinstance(exc, Interrupted):
        signalled: Interrupted | None = exc
    else:  # the signal may have come together with the error
        signalled = Interrupted(_signals.pending) if _signals.pending else None
    if signalled is not None:
        dist.mark_leaving(ctx)
        if all(what == "running" for what in dist.local_peer_states(ctx).values()):
            return signalled
    answered = dist.roll_call(ctx, min(FAILURE_ROLL_CALL_S, timeout_s))
    local = dist.local_peer_states(ctx)
    crashed = {rank: what for rank, what in local.items() if what != "running"}
    # torchrun stops the survivors of a dead rank with SIGTERM, often before their next collective
    # would have failed: with a dead peer on this host that is a failure, and the peer is named.
    reason = f"{signalled} from the launcher" if signalled is not None else dist.backend_error_text(exc)
    if "timed out" in reason.lower() or "timeout" in reason.lower():  # gloo words it either way
        reason += f" (--timeout {timeout_s:g} s)"
    present, silent = answered if answered is not None else ([], sorted(crashed))
    # A live rank on this host that did not check in is blocked waiting for us, not at fault.
    missing = [r for r in silent if local.get(r) != "running"]
    live = sorted(set(present) | {r for r, what in local.items() if what == "running"} | {ctx.rank})
    quiet = live[0] != ctx.rank
    if not missing:
        return RunFailedError(f"{where} failed on rank {ctx.rank}: {reason}", quiet=quiet)
    names = ", ".join(
        f"rank {r}" + (f" on host {hostnames[r]}" if hostnames else "") + (f" ({crashed[r]})" if r in crashed else "")
        for r in missing
    )
    verb = "does" if len(missing) == 1 else "do"
    return RunFailedError(f"{where} failed: {names} {verb} not answer; rank {ctx.rank} saw: {reason}", quiet=quiet)
