"""The set-up's roll call on a real store (torch's HashStore): who never joined, who joined and died,
who stalled in an earlier step; and the join's own wait, which ends --timeout after the last arrival."""

from __future__ import annotations

import os
import time

import pytest

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import set_up
from nccl_bench.ranks.dist import hostname
from tests.helpers.processes import dead_pid


@pytest.fixture
def store():
    import torch.distributed as tdist

    return tdist.HashStore()


def _watch(rank: int, world_size: int, store, timeout_s: float = 30.0) -> set_up.SetUp:
    watch = set_up.SetUp("doctor")
    watch.start(rank, world_size, timeout_s)
    watch.store = store
    return watch


def test_a_lone_rank_joins_at_once(store):
    watch = _watch(0, 1, store)
    try:
        watch.join(store, hosts_store=False)
    finally:
        watch.close()
    assert int(store.add(set_up.JOINED_COUNT, 0)) == 1
    assert store.get("nccl_bench/set_up/joined/0").decode() == f"{hostname()} {os.getpid()}"


def test_the_join_names_the_rank_that_never_came_once_nobody_arrives_for_the_timeout(store):
    watch = _watch(0, 3, store, timeout_s=0.5)
    store.set("nccl_bench/set_up/joined/2", "node003 4242")
    store.add(set_up.JOINED_COUNT, 1)
    started = time.monotonic()
    try:
        with pytest.raises(RunFailedError) as info:
            watch.join(store, hosts_store=False)
    finally:
        watch.close()
    assert 0.5 <= time.monotonic() - started < 0.5 + set_up.ROLL_CALL_S + 5  # the roll call waits for rank 2
    assert str(info.value) == (
        "setting up the doctor failed: rank 1 never joined (2 of 3 did); rank 2 (node003, pid 4242) joined but "
        "never finished setting up; rank 0 saw: joining the rendezvous made no progress for more than 0.5 s "
        "(--timeout 0.5 s)")


def test_a_rank_that_died_here_and_one_stalled_in_an_earlier_step_are_named_and_a_ready_one_is_not(
        store, monkeypatch):
    monkeypatch.setattr(set_up, "ROLL_CALL_S", 0.2)
    watch = _watch(0, 5, store)
    dead = dead_pid()
    store.set("nccl_bench/set_up/joined/1", f"{hostname()} {dead}")  # joined, then died on this host
    store.set("nccl_bench/set_up/joined/2", "node003 77")  # stuck in its join: its own watchdog fired
    store.set("nccl_bench/set_up/failed/2", "2|1|joining the rendezvous made no progress for more than 30 s")
    store.set("nccl_bench/set_up/joined/3", "node004 78")  # waited on the others, as this rank did
    store.set("nccl_bench/set_up/failed/3", "5|1|the run's first exchanges made no progress for more than 30 s")
    store.set("nccl_bench/set_up/joined/4", "node005 79")
    store.set("nccl_bench/set_up/ready/4", "1")
    for step in ("opening the rendezvous store", "joining the rendezvous", "making the process group",
                 "making the side group", "the run's first exchanges"):
        watch.step(step)
    try:
        failure = watch.failure("the run's first exchanges made no progress for more than 30 s", stalled=True)
    finally:
        watch.close()
    assert str(failure) == (
        f"setting up the doctor failed: rank 1 ({hostname()}, pid {dead}: died) joined but never finished setting "
        "up; rank 2 (node003, pid 77) stalled: joining the rendezvous made no progress for more than 30 s; rank 0 "
        "saw: the run's first exchanges made no progress for more than 30 s")
    assert store.get("nccl_bench/set_up/failed/0").decode().startswith("5|1|the run's first exchanges")


def test_a_step_stuck_past_its_grace_is_handed_to_on_stuck_with_the_line(store, monkeypatch):
    monkeypatch.setattr(set_up, "ROLL_CALL_S", 0.1)
    ended = []
    watch = set_up.SetUp("sweep", on_stuck=ended.append)
    monkeypatch.setattr(set_up, "Deadline", _quick_deadline)
    watch.start(0, 1, 0.2)
    watch.store = store
    watch.step("making the process group")
    limit = time.monotonic() + 10
    while not ended and time.monotonic() < limit:
        time.sleep(0.05)
    watch.close()
    assert [str(e) for e in ended] == [
        "setting up the sweep failed: rank 0 saw: making the process group made no progress for more than 0.2 s "
        "(--timeout 0.2 s)"]


def _quick_deadline(timeout_s, abort, on_stuck):
    from nccl_bench.ranks.deadline import Deadline

    return Deadline(timeout_s, abort, on_stuck, margin_s=0.0, grace_s=0.1)

