"""What a replay runs: the job's distinct collectives in the order it first called each, each on the
launch's ranks for its process group; a group larger than the launch refused in one line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.replay.profile import profile_traces
from nccl_bench.replay.replay_plan import launch_ranks, points_for_launch, replayed_trace, source_of
from nccl_bench.replay.trace_reader import RECORD_PARAM_COMMS, CollectiveCall, RankTrace, read_trace

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def _call(op="all_reduce", size=4096, dtype="float32", group=2, ranks=None, start=0.0, time_us=10.0):
    return CollectiveCall(op=op, size_bytes=size, dtype=dtype, group_size=group, group_ranks=ranks, start_us=start,
                          job_time_us=time_us)


def _trace(calls, rank=0, name="rank0.json"):
    return RankTrace(path=Path(name), backend="nccl", rank=rank, world_size=8, nccl_version=None,
                     process_groups=(), calls=tuple(calls), source=RECORD_PARAM_COMMS, window_us=1e4,
                     unmatched_kernels=0)


def test_a_public_nccl_trace_is_planned_one_point_per_profile_row_in_the_jobs_order():
    trace = read_trace(TRACES / "nccl_2gpu_rank0.json.gz")
    plan = points_for_launch(trace, world_size=2)
    profile = profile_traces([trace])
    assert sorted(point.key for point in plan.points) == sorted(row.key[:4] for row in profile.rows)
    counts = {row.key[:4]: row.count for row in profile.rows}
    assert all(point.calls == counts[point.key] and point.ranks == (0, 1) for point in plan.points)
    first_calls = list(dict.fromkeys((c.op, c.size_bytes, c.dtype, c.group_size) for c in trace.calls))
    assert [point.key for point in plan.points] == first_calls
    assert plan.source == "trace:nccl_2gpu_rank0.json.gz" and plan.left_out == ()
    # the largest point's two buffers: all_reduce of 31,502,336 bytes runs in place, send is receive
    assert plan.bytes_per_rank == 2 * 31_502_336


def test_a_group_larger_than_the_launch_is_refused_naming_both_sizes():
    trace = read_trace(TRACES / "nccl_128rank_rank0.json.gz")
    with pytest.raises(UserInputError) as refused:
        points_for_launch(trace, world_size=2)
    assert str(refused.value).endswith("runs on a group of 128 ranks: needs 128 ranks; this launch has 2")
    assert points_for_launch(trace, world_size=128).points  # the same trace fits a launch of its own size


@pytest.mark.parametrize("ranks, group, world, expected", [
    ((0, 1), 2, 2, (0, 1)),
    ((0, 2), 2, 4, (0, 2)),  # the launch has the group's own ranks: kept
    ((3, 1), 2, 4, (1, 3)),  # in rank order, as torch numbers a group's ranks
    ((4, 5, 6, 7), 4, 4, (0, 1, 2, 3)),  # it has not: the launch's first ranks
    (None, 4, 8, (0, 1, 2, 3)),  # a group the trace does not name
    ((), 2, 2, (0, 1)),
])
def test_a_process_group_becomes_the_launchs_ranks(ranks, group, world, expected):
    assert launch_ranks(group, ranks, world) == expected


def test_calls_without_a_size_or_of_an_unknown_type_are_left_out_and_said():
    plan = points_for_launch(_trace([_call(size=None), _call(size=None), _call(dtype="bool"),
                                     _call(op="barrier", size=0, dtype=None)]), 2)
    assert [point.op for point in plan.points] == ["barrier"]
    assert plan.left_out == ("2 call(s) not replayed: all_reduce without a size in the trace (profiled without "
                             "record_shapes)", "1 call(s) not replayed: all_reduce of bool (no buffers of that type "
                                               "are made)")
    with pytest.raises(UserInputError, match="rank0.json: nothing to replay: 1 call"):
        points_for_launch(_trace([_call(size=None)]), 2)


def test_the_lowest_rank_is_replayed_and_its_name_is_made_printable():
    traces = [_trace([_call()], rank=3, name="r3.json"), _trace([_call()], rank=1, name="r\x1b1.json")]
    assert replayed_trace(traces).rank == 1
    assert source_of(replayed_trace(traces)) == "trace:r?1.json"


# torch's profiler writes a list of more than 30 entries as its first 30 and "..."
CUT_64 = "[" + ", ".join(str(2 * rank) for rank in range(30)) + ", ...]"
EVEN_64 = list(range(0, 128, 2))


def test_a_group_cut_short_by_the_profiler_is_made_whole_from_pg_config(tmp_path):
    from tests.helpers.traces import collective, write_trace

    event = collective(ranks=EVEN_64, **{"Process Group Ranks": CUT_64, "Process Group Name": "7"})
    path = write_trace(tmp_path / "t.json", [event], world_size=128,
                       pg_config=[{"pg_name": "7", "pg_size": 64, "ranks": EVEN_64}])
    [call] = read_trace(path).calls
    assert (call.group_ranks, call.ranks_cut) == (tuple(EVEN_64), False)
    assert points_for_launch(read_trace(path), 128).points[0].ranks == tuple(EVEN_64)


def test_a_group_cut_short_and_listed_nowhere_is_left_out_not_guessed(tmp_path):
    from tests.helpers.traces import collective, write_trace

    cut = collective(ranks=EVEN_64, **{"Process Group Ranks": CUT_64, "Process Group Name": "7"})
    path = write_trace(tmp_path / "t.json", [cut, collective(ranks=[0, 1], ts=5.0)], world_size=128)
    plan = points_for_launch(read_trace(path), 128)
    assert [point.ranks for point in plan.points] == [(0, 1)]
    assert plan.left_out == ("1 call(s) not replayed: all_reduce on a group of 64 ranks whose ranks the trace cuts "
                             "short (torch's profiler writes 30) and its distributedInfo pg_config does not list",)


def test_a_world_of_unknown_size_is_asked_for_never_taken_as_one_rank(tmp_path):
    from tests.helpers.traces import write_trace

    annotation = {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 0,
                  "dur": 5, "args": {"Input Dims": [[1024]], "Input type": ["float"]}}
    path = write_trace(tmp_path / "t.json", [annotation], world_size=None, backend="nccl")
    with pytest.raises(UserInputError) as refused:
        points_for_launch(read_trace(path), 2)
    assert str(refused.value) == (
        f"{path}: its all_reduce runs on the whole world, and the trace does not say how many ranks that is: give "
        "the job's traces with their distributedInfo (world_size), as torch.profiler writes them")


def test_an_exchange_is_one_point_between_its_real_peers_on_the_launchs_ranks():
    """Rank 4 of a job sends to 6 and receives from 5: on a 3-rank launch the exchange's ranks (4, 5, 6)
    become 0, 1, 2 in order, so 0 sends to 2 and receives from 1; the profile counts one exchange a call."""
    exchange = dict(op="sendrecv", size=4096, group=3, ranks=(4, 5, 6))
    calls = [replace(_call(**exchange, start=t), transfers=((4, 6), (5, 4))) for t in (0.0, 1.0)]
    [point] = points_for_launch(_trace(calls, rank=4), 3).points
    assert (point.ranks, point.transfers, point.calls) == ((0, 1, 2), ((0, 2), (1, 0)), 2)
    assert point.buffer_elems() == (1024, 1024)
    [row] = profile_traces([_trace(calls, rank=4)]).rows
    assert (row.op, row.count, row.group_ranks) == ("sendrecv", 2, (4, 5, 6))
