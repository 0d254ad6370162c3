"""A stop signal comes out of the guarded block as Interrupted, whatever code it landed in; and a rank
that leaves the report of a failure to a peer waits for that peer before it exits.

A signal's handler runs at whatever bytecode the main thread is at; code that wraps what it raises
(Python 3.11 wraps an error in a class body's ``__set_name__`` in a RuntimeError, as importing torch's
elastic agent does) must not turn a Ctrl-C into a failure with a traceback.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from nccl_bench.ranks import faults


class _SignalledWhileNamed:
    """A descriptor whose __set_name__ is where SIGTERM lands, as in a class body being imported."""

    def __set_name__(self, owner, name):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends


def _define_a_class_with_the_descriptor():
    class Holder:
        field = _SignalledWhileNamed()

    return Holder


def test_a_signal_inside_set_name_is_an_interrupt():
    with pytest.raises(faults.Interrupted, match="SIGTERM"):
        with faults.signals_raise_interrupted():
            _define_a_class_with_the_descriptor()


def test_a_wrapped_interrupt_is_unwrapped_and_other_errors_pass_unchanged():
    interrupt = faults.Interrupted("SIGINT")
    wrapped = RuntimeError("wrapper")
    wrapped.__cause__ = interrupt
    with pytest.raises(faults.Interrupted) as caught:
        with faults.interrupts_unwrapped():
            raise wrapped
    assert caught.value is interrupt
    with pytest.raises(ValueError):
        with faults.interrupts_unwrapped():
            raise ValueError("not a signal")


def test_an_exit_chosen_while_handling_an_interrupt_stays_that_exit():
    """A handler that reports the interrupt and exits raises SystemExit in its context, not from it."""
    with pytest.raises(SystemExit) as caught:
        with faults.interrupts_unwrapped():
            try:
                raise faults.Interrupted("SIGTERM")
            except faults.Interrupted:
                raise SystemExit(130)  # noqa: B904 - the context, not the cause, is what is tested
    assert caught.value.code == 130


@pytest.mark.parametrize("signum", faults.STOP_SIGNALS, ids=lambda signum: signal.Signals(signum).name)
def test_every_stop_signal_is_an_interrupt_named_after_it(signum):
    with pytest.raises(faults.Interrupted, match=signal.Signals(signum).name):
        with faults.signals_raise_interrupted():
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises before this ends
    assert signal.getsignal(signum) is not faults._on_signal  # the handlers before the block are back


# --- a quiet rank waits for the rank that reports ------------------------------------------------


def _store_with_ctx(monkeypatch):
    import torch.distributed as dist

    from nccl_bench.ranks import roll_call

    store = dist.HashStore()
    monkeypatch.setattr(roll_call, "_store", lambda ctx=None: store)
    return store, SimpleNamespace(rank=1, world_size=2)


def test_a_quiet_rank_waits_until_the_reporter_has_left(monkeypatch):
    from nccl_bench.ranks import roll_call

    store, ctx = _store_with_ctx(monkeypatch)
    threading.Timer(0.3, lambda: store.set("nccl_bench/leaving/0", "setting up failed on rank 0: ...")).start()
    started = time.monotonic()
    assert roll_call.await_leaving(ctx, 0, limit_s=10)
    assert 0.25 < time.monotonic() - started < 5


def test_a_reporter_that_never_leaves_is_waited_for_no_longer_than_the_limit(monkeypatch):
    from nccl_bench.ranks import roll_call

    _, ctx = _store_with_ctx(monkeypatch)
    started = time.monotonic()
    assert not roll_call.await_leaving(ctx, 0, limit_s=0.3)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("quiet", [True, False])
def test_only_a_quiet_failure_waits_for_its_reporter(monkeypatch, quiet):
    from nccl_bench.errors import RunFailedError
    from nccl_bench.ranks import roll_call

    waited = []
    failure = RunFailedError("the sweep failed on rank 1: ...", quiet=quiet)
    monkeypatch.setattr(faults, "_failure", lambda *args: (failure, 0))
    monkeypatch.setattr(roll_call, "await_leaving", lambda ctx, rank, limit_s: waited.append((rank, limit_s)))
    assert faults.why_stopped(RuntimeError("x"), SimpleNamespace(rank=1), 2.0, "the sweep", None) is failure
    assert waited == ([(0, faults.FAILURE_ROLL_CALL_S)] if quiet else [])


ENDING_THEN_SIGTERM = """
import os, signal, sys
from nccl_bench.ranks import faults

try:
    with faults.signals_raise_interrupted():
        faults.hold_signals()  # the run's ending: meta.json written, the report to come
        raise RuntimeError("rank 1 does not answer")
except RuntimeError as exc:
    os.kill(os.getpid(), signal.SIGTERM)  # the launcher stops the survivors as the stalled rank leaves
    sys.stderr.write(f"nccl-bench: error: {exc}\\n")
    sys.stderr.flush()
    os._exit(3)
"""


def test_stall_blame_report_survives_a_sigterm_after_the_ending():
    """The stall-blame flake: a SIGTERM from the launcher after the life cycle's ending, before the CLI
    printed the one line, met the default handler again and ended the rank with an empty stderr."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", ENDING_THEN_SIGTERM], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (3, "nccl-bench: error: rank 1 does not answer\n")


def test_a_signal_handled_before_the_watcher_reads_it_is_never_called_unanswered(monkeypatch):
    """The main thread runs the handler at its next bytecode, often before the watcher thread reads the
    signal's byte: that signal was answered, and neither the callback set as it came nor one set later
    (a later step, or a later run in one process) is called."""
    monkeypatch.setattr(faults, "UNANSWERED_SIGNAL_S", 0.3)
    called = []
    with faults.unanswered_signals(lambda name: called.append(("first", name))):
        with pytest.raises(faults.Interrupted), faults.signals_raise_interrupted():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
    with faults.unanswered_signals(lambda name: called.append(("later", name))):
        time.sleep(0.8)  # past the watcher's wait
    assert called == []
