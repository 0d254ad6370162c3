"""The profile: calls grouped by (op, size, dtype, group), the costliest first; counts, medians, the
slowest rank's total, nccl-tests' busbw; several ranks merged; the --json schema."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from nccl_bench.replay.profile import profile_json, profile_traces
from nccl_bench.replay.trace_events import TraceError
from nccl_bench.replay.trace_reader import RECORD_PARAM_COMMS, CollectiveCall, RankTrace, read_trace

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def _call(op="all_reduce", size=1_000_000, time_us=100.0, group=4, start=0.0, ranks=None):
    return CollectiveCall(op=op, size_bytes=size, dtype="float32", group_size=group, group_ranks=ranks,
                          start_us=start, job_time_us=time_us)


def _trace(calls, rank=0, world_size=4, window_us=10_000.0, backend="nccl"):
    return RankTrace(path=Path(f"rank{rank}.json"), backend=backend, rank=rank, world_size=world_size,
                     nccl_version="2.21.5", process_groups=(), calls=tuple(calls), source=RECORD_PARAM_COMMS,
                     window_us=window_us, unmatched_kernels=0)


def test_rows_group_calls_and_put_the_costliest_first():
    calls = [_call(time_us=t) for t in (100.0, 300.0, 200.0)] + [_call(op="all_gather", size=4096, time_us=1000.0)]
    profile = profile_traces([_trace(calls)])
    assert [(row.op, row.count, row.total_time_us, row.job_time_us) for row in profile.rows] == [
        ("all_gather", 1, 1000.0, 1000.0), ("all_reduce", 3, 600.0, 200.0)]
    assert profile.rows[1].share_of_window == pytest.approx(0.06)
    assert profile.collective_share == pytest.approx(0.16)


def test_busbw_is_nccl_tests_at_the_groups_size():
    # 1e6 bytes in 100 us: algbw 10 GB/s; all_reduce on 4 ranks: x 2(n-1)/n = 1.5; all_gather: x (n-1)/n
    profile = profile_traces([_trace([_call(), _call(op="all_gather", time_us=50.0), _call(op="broadcast")])])
    busbw = {row.op: row.job_busbw_gbps for row in profile.rows}
    assert busbw == {"all_reduce": pytest.approx(15.0), "all_gather": pytest.approx(15.0),
                     "broadcast": pytest.approx(10.0)}


def test_a_row_without_any_time_has_no_time_and_comes_last():
    profile = profile_traces([_trace([_call(time_us=None), _call(op="broadcast", time_us=5.0)])])
    last = profile.rows[-1]
    assert (last.op, last.count, last.job_time_us, last.total_time_us, last.job_busbw_gbps) == (
        "all_reduce", 1, None, None, None)


def test_ranks_merge_one_count_the_median_of_all_and_the_slowest_total():
    rank0 = _trace([_call(time_us=100.0), _call(time_us=100.0)], rank=0)
    rank1 = _trace([_call(time_us=300.0), _call(time_us=500.0)], rank=1, window_us=20_000.0)
    profile = profile_traces([rank0, rank1])
    row = profile.rows[0]
    assert (row.count, row.job_time_us, row.total_time_us) == (2, 200.0, 800.0)
    assert profile.window_us == 20_000.0 and profile.ranks_read == (0, 1) and profile.count_mismatches == ()


def test_ranks_that_disagree_on_a_count_are_listed():
    profile = profile_traces([_trace([_call(), _call()], rank=0), _trace([_call()], rank=1)])
    assert profile.rows[0].count == 2
    [mismatch] = profile.count_mismatches
    assert mismatch.key == ("all_reduce", 1_000_000, "float32", 4, None) and mismatch.counts == ((0, 2), (1, 1))


@pytest.mark.parametrize("second,problem", [
    (_trace([_call()], rank=0), "rank 0 again"),
    (_trace([_call()], rank=1, world_size=8), "world size is 8, and that trace's is 4$"),
    (_trace([_call()], rank=1, world_size=None), "world size is not recorded, and that trace's is 4$"),
    (_trace([_call()], rank=1, backend="gloo"), "backend is 'gloo', and that trace's is 'nccl'$"),
])
def test_files_of_different_jobs_are_refused(second, problem):
    with pytest.raises(TraceError, match=problem):
        profile_traces([_trace([_call()], rank=0), second])


def test_a_value_the_first_trace_left_out_is_said_so_never_as_none():
    with pytest.raises(TraceError) as refused:
        profile_traces([_trace([_call()], rank=0, world_size=None), _trace([_call()], rank=1, world_size=2)])
    assert str(refused.value).endswith("its world size is 2, and that trace's is not recorded")
    assert "None" not in str(refused.value)


def test_the_json_schema():
    document = profile_json(profile_traces([read_trace(TRACES / "nccl_2gpu_rank0.json.gz")]))
    overlap = document["trace"].pop("overlap")
    assert document["trace"] == {"backend": "nccl", "world_size": 2, "nccl_version": "2.17.1", "ranks_read": [0],
                                 "exposed_at_replay": None, "exposed_at_envelope": None}
    # the traced window's (HTA's, on the trace's own times: test_overlap.py)
    assert [round(overlap[0][key], 3) for key in ("communication_us", "overlapped_us", "exposed_us", "overlap_pct")] \
        == [24_289.05, 3_585.678, 20_703.372, 14.763]
    first = document["collectives"][0]
    assert list(first) == ["op", "bytes", "dtype", "group_size", "group_ranks", "count", "job_time_us",
                           "job_busbw_gbps", "algo", "proto", "replay_time_us", "replay_launch_path_us",
                           "replay_busbw_gbps", "efficiency", "replay_flags", "communication_us", "overlapped_us",
                           "exposed_us", "overlap_pct", "exposed_at_replay_us", "exposed_at_envelope_us"]
    # its 3 kernels, 11,820.962 us, against the compute union (checked by a brute-force sweep over the raw events)
    assert [round(first[key], 3) for key in ("communication_us", "overlapped_us", "exposed_us", "overlap_pct")] == [
        11_820.962, 1_904.776, 9_916.186, 16.114]
    assert (first["exposed_at_replay_us"], first["exposed_at_envelope_us"]) == (None, None)
    # the 9.7 MB all_reduce and both broadcasts ran beside no compute kernel: all exposed
    assert [row["overlap_pct"] for row in document["collectives"][4:]] == [0.0, 0.0, 0.0]
    # the costliest: all_reduce of 2,049,000 floats, 3 calls; its median kernel took 3306.963 us
    assert (first["op"], first["bytes"], first["count"], first["job_time_us"]) == ("all_reduce", 8_196_000, 3, 3306.963)
    assert first["job_busbw_gbps"] == pytest.approx(8_196_000 / 3306.963e-6 / 1e9 * 1.0)
    assert (first["algo"], first["proto"], first["replay_time_us"], first["efficiency"]) == (None, None, None, None)
    assert sum(row["count"] for row in document["collectives"]) == 21


def test_a_replays_rows_fill_the_replay_fields_of_the_same_collective():
    from nccl_bench.replay.profile import with_replay
    from tests.helpers.rows import row

    profile = profile_traces([_trace([_call(time_us=200.0), _call(op="barrier", size=None, time_us=40.0)])])
    rows = [row(size_bytes=1_000_000, time_us=100.0, dtype="float32", world_size=4),
            row(op="barrier", size_bytes=0, time_us=30.0, dtype="float32", world_size=4, busbw_gbps=None),
            row(size_bytes=2_000_000, time_us=5.0, dtype="float32", world_size=4)]  # no such row in the job
    filled = {entry.op: entry for entry in with_replay(profile, rows, 4).rows}
    assert (filled["all_reduce"].replay_time_us, filled["all_reduce"].efficiency) == (100.0, 0.5)
    assert filled["all_reduce"].replay_busbw_gbps == rows[0].busbw_gbps
    assert (filled["barrier"].replay_time_us, filled["barrier"].efficiency) == (30.0, 0.75)
    assert profile_json(with_replay(profile, rows, 4))["collectives"][0]["efficiency"] == 0.5
    assert filled["all_reduce"].replay_flags == () and profile_json(profile)["collectives"][0]["replay_flags"] == []
    # another group size is another collective
    assert with_replay(profile, [row(size_bytes=1_000_000, dtype="float32", world_size=2)], 4).rows == profile.rows


def test_a_rows_overlap_is_its_most_exposed_ranks_and_its_exposed_time_scales_to_the_replay_and_the_sweep():
    from nccl_bench.replay.overlap import Overlap
    from nccl_bench.replay.profile import with_envelope, with_replay
    from tests.helpers.rows import row

    # rank 0: kernels 0-100 and 200-300 under compute 0-150: exposed 100; rank 1: 0-200 under 50-100: exposed 150
    rank0 = dataclasses.replace(_trace([_call(time_us=100.0, ranks=(0, 1, 2, 3)) for _ in range(2)], rank=0),
                                compute=((0.0, 150.0),))
    rank0 = dataclasses.replace(rank0, calls=(dataclasses.replace(rank0.calls[0], kernels=((0.0, 100.0),)),
                                              dataclasses.replace(rank0.calls[1], kernels=((200.0, 300.0),))))
    rank1 = dataclasses.replace(_trace([_call(time_us=200.0, ranks=(0, 1, 2, 3))], rank=1),
                                compute=((50.0, 100.0),))
    rank1 = dataclasses.replace(rank1, calls=(dataclasses.replace(rank1.calls[0], kernels=((0.0, 200.0),)),))
    profile = profile_traces([rank0, rank1])
    [entry] = profile.rows
    assert entry.overlap == Overlap(communication_us=200.0, overlapped_us=50.0, exposed_us=150.0)
    assert entry.job_time_us == 100.0  # the median of 100, 100, 200
    # replayed at 40 us per call: 150 x 40 / 100
    replayed = with_replay(profile, [row(size_bytes=1_000_000, time_us=40.0, dtype="float32", world_size=4)], 4)
    assert replayed.rows[0].exposed_at_replay_us == 60.0
    # the job's busbw: 1e6 B / 100 us x 1.5 = 15 GB/s; the sweep's 60 GB/s: 25 us per call, 150 x 25 / 100
    sweep = [row(size_bytes=1 << 20, dtype="float32", world_size=4, busbw_gbps=60.0)]
    enveloped = with_envelope(replayed, sweep)
    assert enveloped.rows[0].exposed_at_envelope_us == 37.5 and enveloped.rows[0].exposed_at_replay_us == 60.0
    assert with_envelope(profile, []).rows[0].exposed_at_envelope_us is None  # the sweep has no such row
    # a trace without kernel times (gloo) has no figures
    assert profile_traces([_trace([_call()])]).rows[0].overlap is None


def test_a_replayed_rows_flags_join_its_collective():
    from nccl_bench.replay.profile import with_replay
    from tests.helpers.rows import row

    profile = profile_traces([_trace([_call(size=8, time_us=20.0), _call(size=1 << 24, time_us=9000.0)])])
    rows = [row(size_bytes=8, time_us=25.0, dtype="float32", world_size=4, flags="noisy;call_bound"),
            row(size_bytes=1 << 24, time_us=8000.0, dtype="float32", world_size=4)]
    filled = {entry.size_bytes: entry for entry in with_replay(profile, rows, 4).rows}
    assert (filled[8].replay_flags, filled[1 << 24].replay_flags) == (("noisy", "call_bound"), ())
    document = profile_json(with_replay(profile, rows, 4))
    assert [entry["replay_flags"] for entry in document["collectives"]] == [[], ["noisy", "call_bound"]]


def test_the_windows_exposed_time_at_the_replay_and_the_sweep_is_the_sum_of_the_rows_projections():
    """Two rows exposed 150 and 40 us in the job: at the replay the all_reduce becomes 60 (150 x 40 / 100) and
    the all_gather, not replayed, stays at its 40; at the sweep's busbw the all_reduce becomes 37.5 and the
    all_gather, of which the sweep has no row, stays at 40."""
    from nccl_bench.replay.overlap import Overlap
    from nccl_bench.replay.profile import with_envelope, with_replay
    from tests.helpers.rows import row

    base = profile_traces([_trace([_call(time_us=100.0), _call(op="all_gather", size=4096, time_us=80.0)])])
    exposed = {"all_reduce": Overlap(200.0, 50.0, 150.0), "all_gather": Overlap(40.0, 0.0, 40.0)}
    profile = dataclasses.replace(base, rows=tuple(dataclasses.replace(entry, overlap=exposed[entry.op])
                                                   for entry in base.rows))
    assert (profile.exposed_at_replay, profile.exposed_at_envelope) == (None, None)
    replayed = with_replay(profile, [row(size_bytes=1_000_000, time_us=40.0, dtype="float32", world_size=4)], 4)
    assert profile_json(replayed)["trace"]["exposed_at_replay"] == {
        "job_us": 190.0, "projected_us": 100.0, "rows": 2, "projected_rows": 1}
    # the job's all_reduce busbw: 1e6 B / 100 us x 1.5 = 15 GB/s; the sweep's 60 GB/s: 25 us, 150 x 25 / 100
    sweep = [row(size_bytes=1 << 20, dtype="float32", world_size=4, busbw_gbps=60.0)]
    enveloped = profile_json(with_envelope(replayed, sweep))["trace"]
    gather = next(entry for entry in with_envelope(replayed, sweep).rows if entry.op == "all_gather")
    assert gather.exposed_at_envelope_us is None  # the sweep has no all_gather: kept at its job value
    assert enveloped["exposed_at_envelope"] == {"job_us": 190.0, "projected_us": 77.5, "rows": 2,
                                                "projected_rows": 1}
    assert enveloped["exposed_at_replay"]["projected_us"] == 100.0
    json.dumps(enveloped, allow_nan=False)  # strict JSON


TP, DP = (0, 1, 2, 3), (0, 4, 8, 12)


def test_groups_of_one_size_are_rows_apart_and_each_joins_its_own_replay():
    """A TP group [0-3] at 100 us and a DP group [0,4,8,12] at 900 us: two rows, each with its own median,
    and on a 16-rank launch each beside the replay on its own ranks."""
    from nccl_bench.replay.profile import with_replay
    from tests.helpers.rows import row

    calls = [_call(size=4 << 20, time_us=100.0, ranks=TP) for _ in range(3)]
    calls += [_call(size=4 << 20, time_us=900.0, ranks=DP) for _ in range(3)]
    profile = profile_traces([_trace(calls, world_size=16)])
    assert [(entry.group_ranks, entry.count, entry.job_time_us) for entry in profile.rows] == [
        (DP, 3, 900.0), (TP, 3, 100.0)]
    rows = [row(size_bytes=4 << 20, time_us=90.0, dtype="float32", world_size=4, group="ranks 0-3"),
            row(size_bytes=4 << 20, time_us=850.0, dtype="float32", world_size=4, group="ranks 0,4,8,12")]
    filled = {entry.group_ranks: entry for entry in with_replay(profile, rows, 16).rows}
    assert (filled[TP].replay_time_us, filled[TP].efficiency) == (90.0, 0.9)
    assert (filled[DP].replay_time_us, filled[DP].efficiency) == (850.0, pytest.approx(850 / 900))
    # on 4 ranks both groups replay on ranks 0-3, the whole launch: one replayed row for both
    on_four = with_replay(profile, [row(size_bytes=4 << 20, time_us=80.0, dtype="float32", world_size=4)], 4)
    assert [entry.replay_time_us for entry in on_four.rows] == [80.0, 80.0]
    assert [c["group_ranks"] for c in profile_json(profile)["collectives"]] == [list(DP), list(TP)]


def test_a_rank_outside_a_named_group_is_no_count_mismatch():
    rank0 = _trace([_call(ranks=(0, 1)), _call(ranks=(0, 1))], rank=0)
    rank2 = _trace([_call(ranks=(2, 3)), _call(ranks=(2, 3))], rank=2)
    profile = profile_traces([rank0, rank2])
    assert len(profile.rows) == 2 and profile.count_mismatches == ()


def test_the_sweeps_row_nearest_in_size_stands_beside_a_collective():
    from nccl_bench.replay.profile import envelope_row
    from tests.helpers.rows import row

    [entry] = profile_traces([_trace([_call(size=2_500_000)])]).rows
    sweep = [row(size_bytes=size, dtype="float32", world_size=4) for size in (1 << 20, 2 << 20, 4 << 20)]
    assert envelope_row(entry, sweep).size_bytes == 2 << 20  # 2.5 MB: 1.19 x 2 MiB, 4 MiB / 1.68
    assert envelope_row(entry, [row(size_bytes=1 << 20, dtype="float32", world_size=2)]) is None
    assert envelope_row(entry, [row(size_bytes=1 << 20, dtype="float16", world_size=4)]) is None
