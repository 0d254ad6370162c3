"""--cuda-graph on a replay: refused on CPU and where no op of the traces can be captured, with the sweep's
own rule and reasons (ranks/graph_capture.py); each point and its per-call floor timed with it; and the
output saying which time its "alone here" column is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from nccl_bench.errors import OptionError
from nccl_bench.ranks.runner import CallFloors, Measurement
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


def test_with_cuda_graph_on_a_gpu_each_point_is_also_timed_through_torchs_launch_path():
    """The second timing is the first's plan without the graph (call by call, as without --cuda-graph); none
    where the first is that already (no --cuda-graph, or on CPU)."""
    from nccl_bench.replay.replay_body import launch_path_plan

    config = ReplayConfig(traces=(Path("rank0.json"),), warmup=2, iters=7, trials=3, cuda_graph=10)
    assert launch_path_plan(config, on_gpu=True) == dataclasses.replace(timing_plan(config, True), cuda_graph=0)
    assert launch_path_plan(config, on_gpu=True) == timing_plan(dataclasses.replace(config, cuda_graph=0), True)
    assert launch_path_plan(config, on_gpu=False) is None
    assert launch_path_plan(ReplayConfig(traces=(Path("rank0.json"),)), on_gpu=True) is None


def _timed(time_us: float) -> Measurement:
    return Measurement(iters=10, sample_means_us=(time_us,), per_op_us=(time_us,), max_time_rank=0,
                       shortest_sample_s=1.0, timer_resolution_s=1e-9)


def test_a_graphed_point_is_measured_in_its_graph_then_through_the_launch_path_and_its_row_holds_both(monkeypatch):
    from types import SimpleNamespace

    from nccl_bench.replay import replay_body

    measured = []

    class Runner:  # the runner of ranks/runner.py, answering each plan with its own time
        def __init__(self, ctx, plan, progress):
            self.plan = plan

        def measure(self, run_once):
            measured.append(self.plan.cuda_graph)
            return _timed(40.0 if self.plan.cuda_graph else 90.0)

    monkeypatch.setattr(replay_body, "PointRunner", Runner)
    monkeypatch.setattr(replay_body, "_why_unsupported", lambda ctx, run_once: None)
    body = replay_body._Replay(ReplayConfig(traces=(Path("rank0.json"),), cuda_graph=10), _plan(ALL_REDUCE), {})
    body.contexts = {(0, 1): SimpleNamespace(rank=0, on_gpu=True)}
    body.run = SimpleNamespace(hostnames=["node", "node"], request=SimpleNamespace(backend="nccl"),
                               launch=SimpleNamespace(world_size=2), renew=lambda *_, **__: None)
    body._bound = lambda *_: (lambda: None)
    body._floor_us = lambda *_: None
    graphed, _ = body._point(ALL_REDUCE, lambda: None)
    assert measured == [10, 0] and (graphed.time_us, graphed.launch_path_us) == (40.0, 90.0)
    body.config, body.contexts[(0, 1)].on_gpu, measured[:] = ReplayConfig(traces=(Path("rank0.json"),)), False, []
    plain, _ = body._point(ALL_REDUCE, lambda: None)
    assert measured == [0] and (plain.time_us, plain.launch_path_us) == (90.0, None)


def test_the_launch_path_time_reaches_results_csv_the_json_and_the_table_beside_kernel_time(tmp_path):
    from nccl_bench.render.replay_text import profile_lines
    from nccl_bench.results.csv_appender import ResultsWriter
    from nccl_bench.results.loader import read_run

    writer = ResultsWriter(tmp_path)
    writer.append(row(size_bytes=1_000_000, time_us=50.0, dtype="float32", world_size=4, launch_path_us=80.0))
    writer.close()
    rows = read_run(tmp_path, "run").rows
    assert rows[0].launch_path_us == 80.0
    graphed = with_replay(_profile(), rows, 4, cuda_graph=10)
    found = profile_json(graphed)["collectives"][0]
    assert (found["replay_time_us"], found["replay_launch_path_us"]) == (50.0, 80.0)
    lines = [str(line) for line in profile_lines(graphed, [Path("rank0.json")], None)]
    header = next(index for index, line in enumerate(lines) if line.startswith("op "))
    assert lines[header].endswith("alone here  busbw here  alone/job  launch path")
    assert lines[header + 2].split()[-4:] == ["50.0", "20.00", "50", "80.0"]  # kernel time, then the launch path's
    assert any(line.startswith("# alone here: kernel time, 10 calls captured in a CUDA graph") for line in lines)
    assert any(line.startswith("# launch path: the same collective call by call through torch's launch path")
               for line in lines)
    plain = with_replay(_profile(), [row(size_bytes=1_000_000, time_us=50.0, dtype="float32", world_size=4)], 4)
    plain_lines = [str(line) for line in profile_lines(plain, [Path("rank0.json")], None)]
    assert not any(line.startswith("# launch path") or line.endswith("launch path") for line in plain_lines)
    assert profile_json(plain)["collectives"][0]["replay_launch_path_us"] is None
