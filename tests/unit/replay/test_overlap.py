"""Communication overlapped by compute and exposed, as HTA's get_comm_comp_overlap defines it, on every real
GPU trace the tests hold, against HTA 0.5.0's own figures recorded beside the fixtures (hta_overlap.json)."""

from __future__ import annotations

import gc
import json
import math
import types
from pathlib import Path

import pytest

from nccl_bench.replay.overlap import MERGED_RUNS, ActivityScan, kind_of, overlap_of, read_overlap, union
from nccl_bench.replay.trace_reader import read_trace

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
HTA = json.loads((TRACES / "hta_overlap.json").read_text())
TOLERANCE_POINTS = 0.1


@pytest.mark.parametrize("name", sorted(HTA["comp_comm_overlap_pctg"]))
def test_the_overlap_matches_hta_0_5_0_on_every_real_gpu_trace(name):
    """With HTA's rounding of each activity inward to whole microseconds, its figure within 0.1 points (HTA
    rounds its own to 2 decimals); a trace without communication has none, where HTA prints nan."""
    expected = HTA["comp_comm_overlap_pctg"][name]
    found = read_overlap(TRACES / name, whole_us=True)
    if expected is None:
        assert found.communication_us == 0 and found.overlap_pct is None
    else:
        assert found.overlap_pct == pytest.approx(expected, abs=TOLERANCE_POINTS)
        assert found.overlapped_us + found.exposed_us == pytest.approx(found.communication_us)


def test_on_whole_microsecond_times_the_traces_own_times_give_htas_figure():
    """The 128-rank trace's times are whole microseconds: no rounding, the same figure."""
    assert read_overlap(TRACES / "nccl_128rank_rank0.json.gz").overlap_pct == pytest.approx(11.81, abs=0.005)


def test_on_fractional_times_the_traces_own_times_are_kept_and_differ_from_htas_rounding():
    exact = read_overlap(TRACES / "nccl_2gpu_rank0.json.gz")
    assert exact.overlap_pct == pytest.approx(14.7625, abs=0.001) and exact.communication_us > 24_278


def test_exposed_time_is_communication_outside_every_compute_interval():
    # communication 0-10 and 20-30; compute 5-8 and 7-25 (merged: 5-25): overlapped 5 + 5, exposed 5 + 5
    found = overlap_of([(0, 10), (20, 30)], [(5, 8), (7, 25)])
    assert (found.communication_us, found.overlapped_us, found.exposed_us, found.overlap_pct) == (20, 10, 10, 50)
    assert union([(3, 4), (0, 2), (1, 3), (9, 9)]) == [(0, 4)]


@pytest.mark.parametrize("name,kind", [("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "communication"),
                                       ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)", "communication"),
                                       ("Memcpy DtoD (Device -> Device)", "memory"), ("Memset (Device)", "memory"),
                                       ("void at::native::vectorized_elementwise_kernel<4>", "compute"),
                                       ("Event Sync", "other"), ("ncclUnrelated", "compute")])
def test_htas_kernel_classes(name, kind):
    assert kind_of(name) == kind


def test_the_trace_readers_one_pass_gives_the_same_window_figure_and_keeps_each_calls_kernels():
    path = TRACES / "nccl_2gpu_rank0.json.gz"
    trace = read_trace(path)
    assert trace.overlap == read_overlap(path)
    assert trace.compute == tuple(union(trace.compute)) and len(trace.compute) > 1
    for call in trace.calls:  # an end on the trace's clock (~1.7e12 us) holds a duration to ~1e-3 us
        assert math.fsum(end - start for start, end in call.kernels) == pytest.approx(call.job_time_us or 0.0,
                                                                                      abs=1e-3)
    assert sum(len(call.kernels) for call in trace.calls) == 21  # every NCCL kernel of the fixture


def _kernel_and_launch(n: int, stream: int, name: str) -> list[dict]:
    return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.0 * n, "dur": 1.0,
             "args": {"correlation": 2 * n + stream}},
            {"ph": "X", "cat": "kernel", "name": name, "ts": 10.0 * n + 2, "dur": 3.0 + stream,
             "args": {"correlation": 2 * n + stream, "stream": stream}}]


def _retained_objects(root: object) -> int:
    """The objects reachable from `root` through its own references (classes, modules and functions not
    entered): what it holds, one count per object however large (an array of floats is one)."""
    seen, todo = set(), [root]
    while todo:
        value = todo.pop()
        if id(value) in seen or isinstance(value, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(value))
        todo.extend(gc.get_referents(value))
    return len(seen)


def test_the_activity_scan_holds_no_object_per_kernel_or_launch():
    """What grows with the trace's kernels is held in arrays: a scan of 1,000 compute and 1,000 NCCL kernels
    and their launches holds as many objects as one of 10."""
    held = []
    for kernels in (10, 1000):
        scan = ActivityScan()
        for n in range(kernels):
            for event in _kernel_and_launch(n, 0, "sm90_gemm") + _kernel_and_launch(n, 1, "ncclDevKernel_x"):
                scan.add(event)
        assert len(scan.compute()) == kernels
        held.append(_retained_objects(scan))
    assert held[0] == held[1]


def test_the_last_profiler_steps_launches_are_left_out_whatever_the_order_of_the_events():
    # compute 2-5 (launched at 0), 12-15 (10), 22-25 (20); communication 2-6, 12-16, 22-26; the last step begins
    # at 20, so what was launched at 20 is left out, launches and kernels written last first
    events = [event for n in range(3) for event in _kernel_and_launch(n, 0, "sm90_gemm")
              + _kernel_and_launch(n, 1, "ncclDevKernel_x")]
    events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": 10.0 * n, "dur": 10.0}
               for n in (1, 2)]
    scan = ActivityScan()
    for event in reversed(events):
        scan.add(event)
    assert scan.overlap() == overlap_of([(2, 6), (12, 16)], [(2, 5), (12, 15)])
    assert scan.overlap().overlapped_us == 6 and list(scan.compute()) == [(2, 5), (12, 15), (22, 25)]


@pytest.mark.parametrize("order", ["ascending", "two runs", "descending"])
def test_the_union_is_one_whatever_the_order_of_the_intervals(order):
    """Ascending runs are merged, and past MERGED_RUNS runs (a trace written backwards) the intervals are sorted:
    the same union either way."""
    intervals = [(10.0 * n, 10.0 * n + 5) for n in range(3 * MERGED_RUNS)] + [(4.0, 12.0)]
    given = {"ascending": sorted(intervals), "two runs": intervals, "descending": sorted(intervals, reverse=True)}
    assert union(given[order]) == [(0.0, 15.0)] + [(10.0 * n, 10.0 * n + 5) for n in range(2, 3 * MERGED_RUNS)]
