"""The deadline's thread: abort past the budget, hand a rank that never comes back to on_stuck."""

from __future__ import annotations

import threading
import time

import pytest

from nccl_bench.ranks.deadline import Deadline, DeadlineExceeded

TIMEOUT_S = 0.05


def _deadline(on_stuck=None, grace_s=0.2):
    aborted: list[DeadlineExceeded] = []
    done = threading.Event()

    def abort(exc):
        aborted.append(exc)
        done.set()

    return Deadline(TIMEOUT_S, abort, on_stuck, margin_s=0.0, grace_s=grace_s), aborted, done


def test_a_step_past_its_budget_aborts_and_the_main_thread_raises_at_its_next_step():
    deadline, aborted, done = _deadline()
    with deadline:
        deadline.renew("all_reduce at 4K (in_place)")
        assert done.wait(2.0)
        assert aborted[0].where == "all_reduce at 4K (in_place)"
        with pytest.raises(DeadlineExceeded, match=r"no progress for more than 0.05 s \(--timeout 0.05 s\)"):
            deadline.renew()
        assert deadline.expired == "all_reduce at 4K (in_place)"


def test_steps_that_renew_in_time_and_a_disarmed_point_never_abort():
    deadline, aborted, _ = _deadline()
    with deadline:
        deadline.renew("a point")
        for _ in range(6):  # 6 x 20 ms: longer than the budget in all, each step within it
            time.sleep(TIMEOUT_S / 2.5)
            deadline.renew()
        deadline.disarm()
        time.sleep(TIMEOUT_S * 3)
    assert aborted == [] and deadline.expired is None


def test_a_main_thread_that_never_comes_back_is_handed_to_on_stuck():
    stuck: list[DeadlineExceeded] = []
    called = threading.Event()
    deadline, aborted, _ = _deadline(on_stuck=lambda exc: (stuck.append(exc), called.set()))
    with deadline:
        deadline.renew("a point")
        assert called.wait(2.0)
    assert aborted and stuck[0].where == "a point"


def test_a_main_thread_back_within_the_grace_period_is_left_to_report_itself():
    stuck: list[DeadlineExceeded] = []
    deadline, _, done = _deadline(on_stuck=stuck.append, grace_s=0.5)
    with deadline:
        deadline.renew("a point")
        assert done.wait(2.0)
        with pytest.raises(DeadlineExceeded):
            deadline.check()
        time.sleep(0.7)
    assert stuck == []
