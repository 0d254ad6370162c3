"""Communication overlapped by compute and exposed, as HTA's get_comm_comp_overlap defines it, on every real
GPU trace the tests hold, against HTA 0.5.0's own figures recorded beside the fixtures (hta_overlap.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_bench.replay.overlap import kind_of, overlap_of, read_overlap, union

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
