"""Real NCCL traces read into their collectives, checked against the traces' own events counted here
with a plain json.load: every record_param_comms collective (or, in an older trace, every nccl:*
annotation) is a call of the same op and byte count, timed by its own kernel; no algorithm or
protocol is read from a kernel's name."""

from __future__ import annotations

import functools
import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from nccl_bench.replay.trace_events import TraceError
from nccl_bench.replay.trace_reader import ANNOTATIONS, RECORD_PARAM_COMMS, read_trace
from tests.helpers.traces import SENDRECV_KERNEL, coalesced, kernel, launch, point_to_point, write_trace

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
MODERN = TRACES / "nccl_2gpu_rank0.json.gz"
OLDER = TRACES / "nccl_8gpu_older_rank3.json.gz"
RANKS_128 = TRACES / "nccl_128rank_rank0.json.gz"

# What this test knows independently of the reader: the collective names and element types these
# traces hold, and the bytes of each type.
OPS_HERE = {"allreduce": "all_reduce", "broadcast": "broadcast", "nccl:all_reduce": "all_reduce",
            "nccl:all_to_all": "all_to_all"}
BYTES_OF = {"Float": 4, "Long": 8, "Int": 4, "float": 4, "int": 4}


@functools.cache
def _events(path: Path) -> list[dict]:
    """The trace's events as json.load reads them (read once per file: no test changes them)."""
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


_read = functools.cache(read_trace)  # a RankTrace is frozen: one reading serves every test


def test_every_record_param_comms_collective_is_read_with_its_size():
    records = [e for e in _events(MODERN) if e.get("name") == "record_param_comms"]
    collectives = [e["args"] for e in records if e["args"]["Collective name"] != "wait"]
    expected = Counter((OPS_HERE[a["Collective name"]], a["In msg nelems"] * BYTES_OF[a["dtype"]]) for a in collectives)
    trace = _read(MODERN)
    assert trace.source == RECORD_PARAM_COMMS
    assert Counter((call.op, call.size_bytes) for call in trace.calls) == expected
    assert sum(expected.values()) == 21 and len(expected) == 7
    assert {call.group_size for call in trace.calls} == {2} and {call.group_ranks for call in trace.calls} == {(0, 1)}
    assert [call.start_us for call in trace.calls] == sorted(call.start_us for call in trace.calls)


def test_each_call_is_timed_by_its_own_kernel():
    events = _events(MODERN)
    kernels = {e["args"]["External id"]: e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")}
    records = [e for e in events if e.get("name") == "record_param_comms" and e["args"]["Collective name"] != "wait"]
    expected = sorted((r["ts"], kernels[r["args"]["External id"]]["dur"]) for r in records)
    trace = _read(MODERN)
    assert [(call.start_us, call.job_time_us) for call in trace.calls] == expected
    assert trace.unmatched_kernels == 0


def test_no_algorithm_or_protocol_is_read_from_a_kernels_name():
    """NCCL launches every collective through a RING_LL or TREE_LL kernel whatever it chose, so the
    names below say nothing of what ran: the profile claims no algorithm and no protocol."""
    from nccl_bench.replay.profile import profile_traces

    names = {e["name"].split("(")[0] for e in _events(MODERN) if e.get("cat") == "kernel" and "nccl" in e["name"]}
    assert names == {"ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_Broadcast_RING_LL_Sum_int8_t"}
    rows = profile_traces([_read(MODERN)]).rows + profile_traces([_read(OLDER)]).rows
    assert rows and all((row.algo, row.proto) == (None, None) for row in rows)


def test_the_trace_header():
    trace = _read(MODERN)
    assert (trace.backend, trace.rank, trace.world_size, trace.nccl_version) == ("nccl", 0, 2, "2.17.1")
    assert [(g.name, g.ranks) for g in trace.process_groups] == [("0", (0, 1))]
    timed = [e for e in _events(MODERN) if e.get("ph") == "X"]
    start = min(e["ts"] for e in timed)
    assert trace.window_us == pytest.approx(max(e["ts"] + e.get("dur", 0) for e in timed) - start)


def test_an_older_trace_is_read_from_its_annotations_and_shapes():
    events = _events(OLDER)
    annotations = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:")]
    sizes = [math.prod(e["args"]["Input Dims"][0]) * BYTES_OF[e["args"]["Input type"][0]] for e in annotations]
    expected = Counter((OPS_HERE[e["name"]], size) for e, size in zip(annotations, sizes, strict=True))
    trace = _read(OLDER)
    assert trace.source == ANNOTATIONS
    assert not any(e["args"].get("Collective name") for e in events if e.get("name") == "record_param_comms")
    assert Counter((call.op, call.size_bytes) for call in trace.calls) == expected
    assert {call.group_size for call in trace.calls} == {8} == {trace.world_size}


def test_an_older_traces_kernels_are_found_through_their_launches():
    """Its kernels carry their correlation as External id: only the launch ties them to a call."""
    events = _events(OLDER)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    anchor_ids = {e["args"]["External id"] for e in events if e.get("cat") == "user_annotation"}
    assert kernels and not any(k["args"]["External id"] in anchor_ids for k in kernels)
    trace = _read(OLDER)
    assert sum(call.job_time_us is not None for call in trace.calls) == len(kernels) == len(trace.calls)
    assert math.fsum(call.job_time_us for call in trace.calls) == pytest.approx(math.fsum(k["dur"] for k in kernels))
    assert {call.op for call in trace.calls} == {"all_reduce", "all_to_all"}


def test_a_sub_groups_size_is_read_from_the_c10d_op_around_its_annotation():
    events = _events(RANKS_128)
    gathers = [e["args"]["Input Dims"] for e in events if e.get("name") == "c10d::_allgather_base_"]
    assert gathers and all(dims[0][0] == 64 * dims[1][0] for dims in gathers)  # output = 64 inputs
    trace = _read(RANKS_128)
    assert trace.world_size == 128
    all_gathers = [call for call in trace.calls if call.op == "all_gather"]
    assert [(call.group_size, call.size_bytes) for call in all_gathers] == [(64, dims[0][0]) for dims in gathers]
    assert {call.group_size for call in trace.calls if call.op != "all_gather"} == {128}


def test_a_trace_without_collectives_is_refused(tmp_path):
    path = tmp_path / "compute.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 1, "dur": 2,
         "args": {"Collective name": "wait"}}]}))
    with pytest.raises(TraceError, match="no collectives in it"):
        read_trace(path)


TORCH_211 = TRACES / "torch211_nccl2289_1gpu_rank0.json.gz"
OPS_211 = {"allreduce": "all_reduce", "_allgather_base": "all_gather", "broadcast": "broadcast"}


def test_a_trace_of_torch_2_11_with_nccl_2_28_is_read_from_its_records():
    """A one-rank NCCL job on an H100: every record_param_comms collective read with its size, and no job
    time, since NCCL runs no kernel of its own at one rank (a copy, or nothing)."""
    records = [e["args"] for e in _events(TORCH_211) if e.get("name") == "record_param_comms"]
    collectives = [a for a in records if a["Collective name"] != "wait"]
    expected = Counter((OPS_211[a["Collective name"]], a["Out msg nelems"] * BYTES_OF[a["dtype"]]) for a in collectives)
    trace = _read(TORCH_211)
    assert (trace.backend, trace.world_size, trace.nccl_version) == ("nccl", 1, "2.28.9")
    assert Counter((call.op, call.size_bytes) for call in trace.calls) == expected
    assert sum(expected.values()) == 14
    assert {call.job_time_us for call in trace.calls} == {None}
    assert not any(e["name"].startswith("nccl") for e in _events(TORCH_211) if e.get("cat") == "kernel")


def _batch_isend_irecv(tmp_path: Path, kernel_links_the_block: bool) -> Path:
    """Rank 0 of a 4-rank ring in torch's batch_isend_irecv: send 4 KiB to rank 1, receive 4 KiB from rank 3,
    twice; each block's kernel launched in endCoalescing, after the two records closed. The kernel names the
    block's nccl:coalesced annotation by External id, or (older torch) only its launch lies inside it."""
    events = []
    for step, t0 in enumerate((100.0, 500.0)):
        block_id = 50 + step
        events += [point_to_point("send", 1, ts=t0, external_id=10 + 2 * step),
                   point_to_point("recv", 3, ts=t0 + 5, external_id=11 + 2 * step),
                   coalesced(block_id, ts=t0 + 10),
                   launch(block_id + 10_000, ts=t0 + 12),
                   kernel(external_id=block_id if kernel_links_the_block else 0, ts=t0 + 15, dur=30.0 + step,
                          name=SENDRECV_KERNEL)]
        events[-1]["args"]["correlation"] = block_id + 10_000
    return write_trace(tmp_path / "p2p.json", events, rank=0, world_size=4, backend="nccl")


@pytest.mark.parametrize("linked", [True, False], ids=["external-id", "launch"])
def test_a_batched_send_and_recv_are_one_exchange_timed_by_the_blocks_kernel(tmp_path, linked):
    trace = read_trace(_batch_isend_irecv(tmp_path, linked))
    assert trace.unmatched_kernels == 0
    assert [(c.op, c.size_bytes, c.job_time_us) for c in trace.calls] == [("sendrecv", 4096, 30.0),
                                                                         ("sendrecv", 4096, 31.0)]
    assert {c.transfers for c in trace.calls} == {((0, 1), (3, 0))}
    assert {(c.group_size, c.group_ranks) for c in trace.calls} == {(3, (0, 1, 3))}


def test_a_lone_send_is_an_exchange_of_its_own_with_its_peer(tmp_path):
    events = [point_to_point("send", 2, nelems=256, external_id=4), kernel(external_id=4, name=SENDRECV_KERNEL)]
    [call] = read_trace(write_trace(tmp_path / "send.json", events, rank=0, world_size=4, backend="nccl")).calls
    assert (call.op, call.size_bytes, call.transfers, call.group_ranks, call.job_time_us) == \
        ("sendrecv", 1024, ((0, 2),), (0, 2), 5.0)
