"""Where this rank stands, kept per point and told through the store; torch's flight recorder read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_bench.ranks import flight_recorder
from nccl_bench.ranks.positions import Positions
from nccl_bench.units.rank_positions import GroupRecord, Position, Standing

# A gloo dump as torch 2.13 writes it (_dump_fr_trace_json), cut to the fields read.
GLOO_DUMP = {
    "version": "2.10",
    "pg_status": {"0": {"last_enqueued_collective": "7", "last_completed_collective": "6",
                        "last_started_collective": "-1"},
                  "1": {"last_enqueued_collective": "0", "last_completed_collective": "0",
                        "last_started_collective": "-1"}},
    "entries": [
        {"process_group": ["0", "default_pg"], "collective_seq_id": 6, "profiling_name": "gloo:broadcast"},
        {"process_group": ["0", "default_pg"], "collective_seq_id": 7, "profiling_name": "gloo:all_reduce"},
    ],
}


def test_a_point_begun_then_ended_becomes_the_last_completed():
    positions = Positions("gloo")
    positions.begin("all_reduce", 1024)
    positions.end()
    positions.begin("all_reduce", 2048, "rank%2=1")
    assert positions.standing == Standing(Position(1, "all_reduce", 1024), Position(2, "all_reduce", 2048, "rank%2=1"))
    positions.end()
    positions.end()  # a disarm outside a point changes nothing
    assert positions.standing == Standing(Position(2, "all_reduce", 2048, "rank%2=1"), None)


def test_every_ranks_note_is_gathered_under_the_runs_nonce(monkeypatch):
    import torch.distributed as tdist

    store = tdist.HashStore()
    monkeypatch.setattr(flight_recorder, "records", lambda backend: [GroupRecord("default_pg", 3, 3)])
    ranks = []
    for rank in range(3):
        positions = Positions("gloo")
        positions.nonce = "abc"
        positions.begin("all_reduce", 1024)
        if rank != 1:
            positions.end()
            positions.begin("all_reduce", 2048)
        ranks.append(positions)
    for rank in (0, 1):
        ranks[rank].publish(SimpleNamespace(store=store, rank=rank, world_size=3))
    stale = Positions("gloo")
    stale.nonce = "an earlier run"
    stale.publish(SimpleNamespace(store=store, rank=2, world_size=3))
    line, recorder = ranks[0].gather(SimpleNamespace(store=store, rank=0, world_size=3))
    assert line == ("rank 0 last completed #1 all_reduce 1K, in #2 all_reduce 2K; "
                    "rank 1 completed none, in #1 all_reduce 1K; rank 2 said nothing")
    assert recorder == "flight recorder (gloo): group default_pg: #3 completed by ranks 0-1"
    meta = ranks[0].meta()
    assert [state["ranks"] for state in meta["stood"]] == ["0", "1", "2"]
    assert meta["flight_recorder"] == {"line": recorder, "culprits": [], "ranks": [0, 1]}


def test_a_backend_without_a_recorder_is_said_so_in_the_line_and_meta(monkeypatch):
    import torch.distributed as tdist

    store = tdist.HashStore()
    positions = Positions("mpi")
    positions.nonce = "n"
    positions.publish(SimpleNamespace(store=store, rank=0, world_size=1))
    _, recorder = positions.gather(SimpleNamespace(store=store, rank=0, world_size=1))
    assert recorder.startswith("flight recorder: not available for mpi in torch ")
    assert Positions("mpi").meta()["flight_recorder"]["line"] == recorder


def test_no_store_leaves_every_rank_saying_nothing():
    positions = Positions("gloo")
    line, _ = positions.gather(SimpleNamespace(rank=0, world_size=2))  # no store at all
    assert line == "ranks 0-1 said nothing"


def test_a_dump_is_read_into_each_groups_last_enqueued_and_completed():
    assert flight_recorder.group_records(GLOO_DUMP) == [GroupRecord("default_pg", 7, 6, "gloo:all_reduce")]


def test_a_sub_group_is_named_by_its_world_ranks_since_its_number_is_the_ranks_own():
    dumped = {**GLOO_DUMP, "pg_status": {**GLOO_DUMP["pg_status"], "1": {"last_enqueued_collective": "4",
                                                                         "last_completed_collective": "3"}}}
    assert flight_recorder.group_records(dumped, {"0": (0, 1, 2, 3), "1": (1, 3)}) == [
        GroupRecord("default_pg", 7, 6, "gloo:all_reduce"), GroupRecord("ranks 1,3", 4, 3, "")]


def test_torchs_gloo_recorder_holds_a_collective_of_a_real_group(single_rank):
    import torch
    import torch.distributed as tdist

    if flight_recorder.availability("gloo") is not None:
        pytest.skip(flight_recorder.availability("gloo"))  # a torch before the generic recorder (2.8)
    tdist.all_reduce(torch.ones(4))
    found = flight_recorder.records("gloo")
    # gloo marks a collective completed from its own thread, after the call returned: enqueued is what is sure
    assert isinstance(found, list) and any(record.enqueued >= 1 and record.last_op == "gloo:all_reduce"
                                           for record in found), found
    assert all(-1 <= record.completed <= record.enqueued for record in found), found  # -1: none yet


def test_a_cpu_torch_has_no_nccl_recorder_and_says_so():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA: its NCCL recorder may exist")
    why = flight_recorder.availability("nccl")
    if hasattr(torch._C._distributed_c10d, "_dump_nccl_trace_json"):
        assert why is None
    else:
        assert why == f"not available for nccl in torch {torch.__version__}"


def test_the_nccl_recorder_is_read_through_torchs_json_dump_where_torch_has_one(monkeypatch):
    import json

    import torch._C._distributed_c10d as c10d

    asked = {}

    def dump_nccl_trace_json(includeCollectives=None, onlyActive=None):  # noqa: N803 (torch's keywords)
        asked.update(includeCollectives=includeCollectives, onlyActive=onlyActive)
        return json.dumps({**GLOO_DUMP, "entries": [{**entry, "profiling_name": "nccl:all_reduce"}
                                                    for entry in GLOO_DUMP["entries"]]}).encode()

    monkeypatch.setattr(c10d, "_dump_nccl_trace_json", dump_nccl_trace_json, raising=False)
    monkeypatch.setattr(flight_recorder, "group_members", lambda: {})
    assert flight_recorder.availability("nccl") is None
    assert flight_recorder.records("nccl") == [GroupRecord("default_pg", 7, 6, "nccl:all_reduce")]
    assert asked == {"includeCollectives": True, "onlyActive": False}


def test_a_dump_that_fails_is_said_and_never_raised(monkeypatch):
    import torch._C._distributed_c10d as c10d

    def broken(**options):
        raise RuntimeError("the watchdog holds the lock")

    monkeypatch.setattr(c10d, "_dump_nccl_trace_json", broken, raising=False)
    assert flight_recorder.records("nccl") == (
        "the nccl flight recorder could not be dumped (RuntimeError: the watchdog holds the lock)")
