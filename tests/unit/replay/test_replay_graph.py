"""--cuda-graph on a replay: refused on CPU and where no op of the traces can be captured, with the sweep's
own rule and reasons (ranks/graph_capture.py); each point and its per-call floor timed with it; and the
output saying which time its "alone here" column is."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_bench.errors import OptionError
from nccl_bench.ranks.runner import CallFloors
from nccl_bench.replay.profile import profile_json, profile_traces, with_replay
from nccl_bench.replay.replay_body import timing_plan
from nccl_bench.replay.replay_config import ALONE_CUDA_GRAPH, ALONE_LAUNCH_PATH, ReplayConfig
from nccl_bench.replay.replay_plan import ReplayPlan, ReplayPoint, uncaptured_ops
from nccl_bench.replay.trace_reader import RECORD_PARAM_COMMS, CollectiveCall, RankTrace
from nccl_bench.sweep.plan import graph_exclusions
from nccl_bench.sweep.sweep_config import SweepConfig
from tests.helpers.rows import row

ALL_REDUCE = ReplayPoint("all_reduce", 4096, "float32", 2, (0, 1), 3, 10.0)
BARRIER = ReplayPoint("barrier", 0, "float32", 2, (0, 1), 1, 5.0)
SENDRECV = ReplayPoint("sendrecv", 4096, "float32", 2, (0, 1), 2, 8.0, transfers=((0, 1), (1, 0)))


def _plan(*points: ReplayPoint) -> ReplayPlan:
    return ReplayPlan(points, "trace:rank0.json", ())


def test_ops_a_graph_cannot_capture_are_excluded_with_the_sweeps_reasons():
    excluded = uncaptured_ops(_plan(ALL_REDUCE, BARRIER, SENDRECV), 10, "nccl", "2.4.0")
    swept = graph_exclusions(SweepConfig(ops=("all_reduce", "barrier", "sendrecv"), cuda_graph=10), True, "2.4.0")
    assert excluded == swept == {
        "barrier": "--cuda-graph captures only ops with a bandwidth factor (a barrier synchronizes the CPU)",
        "sendrecv": "--cuda-graph cannot capture point-to-point ops on torch 2.4.0 (needs >= 2.7)"}
    assert uncaptured_ops(_plan(ALL_REDUCE, SENDRECV), 10, "nccl", "2.7.1") == {}  # torch captures p2p from 2.7


def test_a_replay_with_nothing_a_graph_can_capture_is_refused():
    with pytest.raises(OptionError) as caught:
        uncaptured_ops(_plan(BARRIER, SENDRECV), 2, "nccl", "2.4.0")
    assert caught.value.key == "cuda_graph"
    assert caught.value.problem.startswith("nothing left to capture in the traces' collectives (barrier, sendrecv): "
                                           "barrier: --cuda-graph captures only ops")


def test_cuda_graph_is_refused_on_cpu_and_nothing_is_excluded_without_it():
    with pytest.raises(OptionError) as caught:
        uncaptured_ops(_plan(ALL_REDUCE), 2, "gloo", "2.11.0")
    assert (caught.value.key, caught.value.problem) == ("cuda_graph", "only applies on GPUs (NCCL); this run uses "
                                                                      "gloo on CPU")
    assert uncaptured_ops(_plan(ALL_REDUCE, BARRIER), 0, "gloo", "2.4.0") == {}
    assert uncaptured_ops(_plan(BARRIER), 0, "nccl", "2.4.0") == {}


def test_the_points_and_their_floors_are_timed_in_cuda_graphs_as_asked():
    config = ReplayConfig(traces=(Path("rank0.json"),), warmup=2, iters=7, trials=3, cuda_graph=10)
    plan = timing_plan(config, on_gpu=True)
    assert (plan.warmup, plan.iters, plan.trials, plan.agg, plan.cuda_graph) == (2, 7, 3, "max", 10)
    assert CallFloors(plan).plan.cuda_graph == 10  # the floor through the same path as the rows
    assert timing_plan(ReplayConfig(traces=(Path("rank0.json"),)), on_gpu=False).cuda_graph == 0


def test_an_op_no_graph_captures_is_a_row_marked_unsupported_with_why_and_is_never_run():
    from types import SimpleNamespace

    from nccl_bench.replay import replay_body
    from nccl_bench.results.schema import STATUS_UNSUPPORTED

    why = uncaptured_ops(_plan(ALL_REDUCE, BARRIER), 10, "nccl", "2.11.0")
    body = replay_body._Replay(ReplayConfig(traces=(Path("rank0.json"),), cuda_graph=10), _plan(ALL_REDUCE, BARRIER),
                               why)
    body.contexts = {(0, 1): SimpleNamespace(rank=0)}  # this rank leads the group
    body.run = SimpleNamespace(hostnames=["node", "node"], request=SimpleNamespace(backend="nccl"),
                               launch=SimpleNamespace(world_size=2))
    body._bound = lambda *_: pytest.fail("an op no graph captures was run")
    row, floor_us = body._point(BARRIER, lambda: None)
    assert (row.op, row.status, row.flags, row.time_us, floor_us) == (
        "barrier", STATUS_UNSUPPORTED, why["barrier"], None, None)


def test_meta_says_which_time_alone_here_is():
    plain = ReplayConfig(traces=(Path("rank0.json"),)).as_meta()
    graphed = ReplayConfig(traces=(Path("rank0.json"),), cuda_graph=10).as_meta()
    assert (plain["cuda_graph"], plain["alone_here"]) == (0, ALONE_LAUNCH_PATH)
    assert (graphed["cuda_graph"], graphed["alone_here"]) == (10, ALONE_CUDA_GRAPH)


def _profile():
    call = CollectiveCall(op="all_reduce", size_bytes=1_000_000, dtype="float32", group_size=4, group_ranks=None,
                          start_us=0.0, job_time_us=100.0)
    return profile_traces([RankTrace(path=Path("rank0.json"), backend="nccl", rank=0, world_size=4,
                                     nccl_version="2.21.5", process_groups=(), calls=(call,),
                                     source=RECORD_PARAM_COMMS, window_us=1e4, unmatched_kernels=0)])


def test_the_replay_json_and_table_say_which_time_alone_here_is():
    from nccl_bench.render.replay_text import profile_lines

    rows = [row(size_bytes=1_000_000, time_us=50.0, dtype="float32", world_size=4, flags="call_bound")]
    assert profile_json(_profile())["alone_here"] is None  # nothing replayed
    graphed, plain = with_replay(_profile(), rows, 4, cuda_graph=10), with_replay(_profile(), rows, 4)
    assert profile_json(graphed)["alone_here"] == {"timing": "cuda_graph", "cuda_graph": 10}
    assert profile_json(plain)["alone_here"] == {"timing": "launch_path", "cuda_graph": 0}
    graph_lines = [str(line) for line in profile_lines(graphed, [Path("rank0.json")], None)]
    plain_lines = [str(line) for line in profile_lines(plain, [Path("rank0.json")], None)]
    assert any(line.startswith("# alone here: kernel time, 10 calls captured in a CUDA graph") for line in graph_lines)
    assert any(line.startswith("# alone here: each call through torch's launch path") for line in plain_lines)
    assert any("call_bound" in line and "replay with --cuda-graph N" in line for line in plain_lines)
    assert any("call_bound" in line and "NCCL's latency, not bandwidth" in line for line in graph_lines)
    assert not any("# alone here" in str(line) for line in profile_lines(_profile(), [Path("rank0.json")], None))
