"""Who a stall is blamed on: the rank that never came back from its deadline's abort, whichever
timeout fired first (NCCL's group timeout comes after every rank's deadline; gloo's before).

The store is a HashStore standing in for the launcher's; rank 0 is the one asking.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import faults, roll_call
from nccl_bench.ranks.deadline import DeadlineExceeded

WHERE = "all_reduce at 4K (in_place)"
STALL_LINE = f"{WHERE} failed on rank 1: no progress for more than 2 s (--timeout 2 s)"


@pytest.fixture()
def store(monkeypatch):
    import torch.distributed as dist

    held = dist.HashStore()
    monkeypatch.setattr(roll_call, "_store", lambda ctx=None: held)
    monkeypatch.setattr(faults, "GRACE_S", 0.0)  # a peer that has not said by the roll call never will
    monkeypatch.setattr(faults, "FAILURE_ROLL_CALL_S", 0.5)
    return held


def _ctx(rank: int = 0, world_size: int = 2):
    return SimpleNamespace(rank=rank, world_size=world_size)


def _blame(exc: BaseException, rank: int = 0) -> RunFailedError:
    stop = faults._failure(exc, _ctx(rank), 2.0, WHERE, None)[0]
    assert isinstance(stop, RunFailedError)
    return stop


def test_a_rank_released_by_its_abort_names_the_peer_that_never_came_back(store):
    """NCCL's order: both deadlines ran out; rank 0's abort released it, rank 1 is stuck."""
    store.set("nccl_bench/leaving/1", STALL_LINE)
    store.set("nccl_bench/after_abort/1", roll_call.STUCK)
    assert str(_blame(DeadlineExceeded(WHERE, 2.0, came_back=True))) == STALL_LINE


def test_a_peer_that_never_says_it_came_back_is_taken_for_stuck(store):
    store.set("nccl_bench/leaving/1", STALL_LINE)
    assert str(_blame(DeadlineExceeded(WHERE, 2.0, came_back=True))) == STALL_LINE
    assert store.get("nccl_bench/after_abort/0").decode() == roll_call.CAME_BACK


def test_the_stuck_rank_names_itself_and_not_the_peer_that_came_back(store):
    store.set("nccl_bench/leaving/0", f"{WHERE} failed on rank 0: no progress for more than 2 s (--timeout 2 s)")
    store.set("nccl_bench/after_abort/0", roll_call.CAME_BACK)
    stop = _blame(DeadlineExceeded(WHERE, 2.0), rank=1)
    assert str(stop) == STALL_LINE and stop.quiet  # rank 0, the lowest live rank, prints it
    assert store.get("nccl_bench/after_abort/1").decode() == roll_call.STUCK


def test_gloos_order_a_backend_timeout_first_still_names_the_stalled_peer(store):
    store.set("nccl_bench/leaving/1", STALL_LINE)
    store.set("nccl_bench/after_abort/1", roll_call.STUCK)
    assert str(_blame(RuntimeError("Timed out waiting 2000ms for recv operation to complete"))) == STALL_LINE


def test_when_every_rank_came_back_the_rank_names_its_own_timeout(store):
    """A step slow on every rank (no one stuck): no peer to blame."""
    store.set("nccl_bench/leaving/1", STALL_LINE)
    store.set("nccl_bench/after_abort/1", roll_call.CAME_BACK)
    assert str(_blame(DeadlineExceeded(WHERE, 2.0, came_back=True))) == (
        f"{WHERE} failed on rank 0: no progress for more than 2 s (--timeout 2 s)")


def test_a_stalls_line_says_where_every_rank_stood_and_what_the_recorder_holds(store, monkeypatch):
    """Rank 1 stalled in its second point and said so from its deadline's thread; rank 0, released by
    its abort, reports: the stall, each rank's standing, the flight recorder's summary; meta.json too."""
    from nccl_bench.ranks import flight_recorder
    from nccl_bench.ranks.positions import Positions
    from nccl_bench.units.rank_positions import GroupRecord

    def positions(rank: int) -> Positions:
        held = Positions("gloo")
        held.nonce = "run"
        held.begin("all_reduce", 1024)
        held.end()
        held.begin("all_reduce", 2048)
        return held

    def recorder(enqueued: int):
        return lambda backend: [GroupRecord("default_pg", enqueued, enqueued - 1, "gloo:all_reduce")]

    monkeypatch.setattr(flight_recorder, "records", recorder(5))
    faults.record_stall(DeadlineExceeded(WHERE, 2.0), _ctx(1), positions(1))
    store.set("nccl_bench/after_abort/1", roll_call.STUCK)
    monkeypatch.setattr(flight_recorder, "records", recorder(6))
    mine = positions(0)
    stop = faults.why_stopped(DeadlineExceeded(WHERE, 2.0, came_back=True), _ctx(0), 2.0, WHERE, None, mine)
    assert str(stop) == (
        f"{STALL_LINE}; where the ranks stood: ranks 0-1 last completed #1 all_reduce 1K, in #2 all_reduce 2K; "
        "flight recorder (gloo): group default_pg: #6 gloo:all_reduce enqueued by rank 0, not joined by rank 1 "
        "(last enqueued #5)")
    assert mine.meta()["flight_recorder"]["culprits"] == [1]
    assert mine.meta()["stood"][0]["ranks"] == "0-1"


def test_a_failure_that_is_no_stall_keeps_its_line(store):
    from nccl_bench.ranks.positions import Positions

    stop = faults.why_stopped(RuntimeError("Connection closed by peer"), _ctx(0, 1), 2.0, WHERE, None,
                              Positions("gloo"))
    assert str(stop) == f"{WHERE} failed on rank 0: Connection closed by peer"
