"""A rank whose collective failed while the run was being stopped (scancel signals every task at once,
but a rank blocked in a collective sees the first rank's exit as an error before its own handler runs)
ends as interrupted, so the run says one "interrupted" line, not a failure line per rank."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import faults, roll_call

CTX = SimpleNamespace(rank=2, world_size=4)
RESET = RuntimeError("Connection reset by peer")


@pytest.fixture
def store(monkeypatch):
    """The roll call's view: who answered (None: the store is gone), why peers left, marks this rank made."""
    view = SimpleNamespace(answered=([0, 1, 2, 3], []), reasons={}, marks=[])
    monkeypatch.setattr(roll_call, "roll_call", lambda ctx, wait_s: view.answered)
    monkeypatch.setattr(roll_call, "leaving_reasons", lambda ctx: dict(view.reasons))
    monkeypatch.setattr(roll_call, "local_peer_states", lambda ctx: {})
    monkeypatch.setattr(roll_call, "mark_leaving", lambda ctx, why=roll_call.LEFT_ON_SIGNAL, replace=False:
                        view.marks.append((why, replace)))
    monkeypatch.setattr(faults, "SIGNAL_GRACE_S", 0.2)
    monkeypatch.setattr(faults._signals, "pending", None)
    return view


def _stop() -> BaseException:
    return faults._failure(RESET, CTX, 5.0, "all_reduce at 4K", None)[0]


def test_an_error_with_a_peer_gone_on_a_signal_and_one_of_its_own_is_an_interrupt(store):
    store.reasons = {0: roll_call.LEFT_ON_SIGNAL}
    faults._signals.pending = "SIGTERM"
    stop = _stop()
    assert isinstance(stop, faults.Interrupted) and str(stop) == "SIGTERM"
    assert store.marks[-1] == (roll_call.LEFT_ON_SIGNAL, True)  # its error line is not the news for the others


def test_with_the_store_gone_a_signal_is_waited_for_briefly(store):
    store.answered = None  # rank 0 hosted it (env://) and has exited
    faults._signals.pending = "SIGTERM"
    assert isinstance(_stop(), faults.Interrupted)
    faults._signals.pending = None
    stop = _stop()  # no signal within the grace: rank 0 died on its own, and this rank's error is the news
    assert isinstance(stop, RunFailedError) and "Connection reset by peer" in str(stop)


def test_a_signal_that_follows_a_peers_own_failure_leaves_it_a_failure(store):
    """torchrun SIGTERMs the survivors of a rank that failed: that failure is what the run says."""
    store.reasons = {1: "all_reduce at 4K failed on rank 1: wrong data"}
    faults._signals.pending = "SIGTERM"
    assert isinstance(_stop(), RunFailedError)
