"""Result rows: an empty CUDA-graph capture gets a flag and no bandwidth; a full one gets size / time."""

from __future__ import annotations

import pytest

from nccl_bench.ranks.runner import FLAG_EMPTY_GRAPH, Measurement
from nccl_bench.sweep import rows
from nccl_bench.sweep.plan import Point
from nccl_bench.sweep.sweep_config import SweepConfig
from nccl_bench.units.op_table import OPS


def _measurement(empty: bool) -> Measurement:
    return Measurement(iters=100_000, sample_means_us=(0.3,), per_op_us=(0.3,), max_time_rank=0,
                       shortest_sample_s=0.03, timer_resolution_s=0.5e-6, empty_graph=empty)


def test_an_empty_capture_is_flagged_and_given_no_bandwidth():
    config = SweepConfig(ops=("broadcast",), sizes=(64 << 20,), cuda_graph=10)
    run = rows.RowContext(config, world_size=1, nodes=1, backend="nccl", peak_gbps=None)
    point = Point("broadcast", "in_place", 64 << 20, 16 << 20, 16 << 20)
    collective = OPS["broadcast"]
    row = rows.measured_row(run, point, collective, _measurement(True), 0)
    assert FLAG_EMPTY_GRAPH in row.flags.split(";")
    assert (row.algbw_gbps, row.busbw_gbps, row.pct_of_peak) == (None, None, None) and row.time_us == 0.3
    two = rows.RowContext(config, world_size=2, nodes=1, backend="nccl", peak_gbps=None)
    full = rows.measured_row(two, point, collective, _measurement(False), 0)
    assert full.algbw_gbps == pytest.approx((64 << 20) / 0.3e-6 / 1e9) and FLAG_EMPTY_GRAPH not in full.flags


@pytest.mark.parametrize("op,placement,flagged", [
    ("all_reduce", "in_place", True), ("broadcast", "in_place", True), ("all_gather", "in_place", True),
    ("all_gather", "out_of_place", False),  # one rank still copies its input into the output
])
def test_an_in_place_row_of_one_rank_is_flagged_and_given_no_bandwidth(op, placement, flagged):
    """At one rank NCCL's enqueue returns without queuing work for an in-place collective: nothing moved."""
    config = SweepConfig(ops=(op,), sizes=(1 << 30,))
    point = Point(op, placement, 1 << 30, 1 << 30, 1 << 30)
    one = rows.measured_row(rows.RowContext(config, world_size=1, nodes=1, backend="nccl", peak_gbps=900.0), point,
                            OPS[op], _measurement(False), 0)
    assert (rows.FLAG_ONE_RANK_IN_PLACE in one.flags.split(";")) == flagged
    assert (one.algbw_gbps is None and one.busbw_gbps is None and one.pct_of_peak is None) == flagged
    two = rows.measured_row(rows.RowContext(config, world_size=2, nodes=1, backend="nccl", peak_gbps=900.0), point,
                            OPS[op], _measurement(False), 0)
    assert rows.FLAG_ONE_RANK_IN_PLACE not in two.flags and two.busbw_gbps is not None


def test_p50_p95_p99_are_type_7_percentiles_of_the_per_op_times():
    config = SweepConfig(ops=("all_reduce",), sizes=(1024,))
    run = rows.RowContext(config, world_size=2, nodes=1, backend="gloo", peak_gbps=None)
    point = Point("all_reduce", "in_place", 1024, 256, 256)
    per_op = tuple(float(v) for v in range(1, 21))  # 1..20 us
    measurement = Measurement(iters=20, sample_means_us=(10.5,), per_op_us=per_op, max_time_rank=0,
                              shortest_sample_s=0.2, timer_resolution_s=1e-9)
    row = rows.measured_row(run, point, OPS["all_reduce"], measurement, 0)
    # position (n-1) q / 100 in the sorted times: 9.5, 18.05 and 18.81 -> 10.5, 19.05, 19.81
    assert (row.p50_us, row.p95_us, row.p99_us) == pytest.approx((10.5, 19.05, 19.81))


def test_all_reduce_above_the_peak_behind_an_nvswitch_is_flagged_as_nvls_and_carries_its_variant():
    from nccl_bench.hardware.nvls import NVLS_FLAG

    config = SweepConfig(ops=("all_reduce",), sizes=(1 << 30,))
    point = Point("all_reduce", "in_place", 1 << 30, 1 << 28, 1 << 28)
    # 1 GiB in 3,900 us on 8 ranks: busbw 1.75 x 275 = 482 GB/s, above 450 (NVLink4 x18)
    measurement = Measurement(iters=20, sample_means_us=(3900.0,), per_op_us=(3900.0,), max_time_rank=0,
                              shortest_sample_s=0.078, timer_resolution_s=1e-9)
    flagged = {}
    for nvswitch in (True, False, None):
        run = rows.RowContext(config, world_size=8, nodes=1, backend="nccl", peak_gbps=450.0,
                              variant="NCCL_NVLS_ENABLE=1", nvswitch=nvswitch)
        row = rows.measured_row(run, point, OPS["all_reduce"], measurement, 0)
        assert row.pct_of_peak > 100 and row.variant == "NCCL_NVLS_ENABLE=1"
        flagged[nvswitch] = NVLS_FLAG in row.flags.split(";")
    assert flagged == {True: True, False: False, None: False}


@pytest.mark.parametrize("p50_us,floor_us,flagged", [(12.0, 10.0, True), (12.01, 10.0, False), (10.0, 10.0, True),
                                                     (30.0, None, False), (8.0, 10.0, True)])
def test_a_row_whose_median_call_sits_within_1_2x_of_the_per_call_floor_is_call_bound(p50_us, floor_us, flagged):
    config = SweepConfig(ops=("all_reduce",), sizes=(4096,))
    run = rows.RowContext(config, world_size=2, nodes=1, backend="gloo", peak_gbps=None)
    point = Point("all_reduce", "in_place", 4096, 1024, 1024)
    # a mean far above the median (one stalled op) does not decide: the median call does
    measurement = Measurement(iters=3, sample_means_us=(p50_us * 5,), per_op_us=(p50_us, p50_us, p50_us * 13),
                              max_time_rank=0, shortest_sample_s=0.2, timer_resolution_s=1e-9)
    row = rows.measured_row(run, point, OPS["all_reduce"], measurement, 0, floor_us)
    assert (rows.FLAG_CALL_BOUND in row.flags.split(";")) is flagged
    assert row.busbw_gbps is not None  # still a bandwidth, flagged as what it is
