"""A stop signal comes out of the guarded block as Interrupted, whatever code it landed in.

A signal's handler runs at whatever bytecode the main thread is at; code that wraps what it raises
(Python 3.11 wraps an error in a class body's ``__set_name__`` in a RuntimeError, as importing torch's
elastic agent does) must not turn a Ctrl-C into a failure with a traceback.
"""

from __future__ import annotations

import os
import signal
import time

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
