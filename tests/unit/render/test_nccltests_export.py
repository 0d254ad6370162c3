"""nccl-tests' text layout written from rows: the number format, the header and footer, and reading it back."""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path

from nccl_bench.render import nccltests_text
from nccl_bench.results.loader import load_rows
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT
from tests.helpers.rows import log_rows, row

# A two-rank all_gather at 1 MiB as nccl-tests reports it.
_row = partial(row, op="all_gather", placement=PLACEMENT_OUT, size_bytes=1048576, count=131072, dtype="float32",
               redop="none", iters=50, trials=3, time_us=2083.734, time_min_us=2000.0, time_max_us=2100.0,
               p50_us=1381.4, p99_us=2500.0, algbw_gbps=0.503222, busbw_gbps=0.251611, busbw_factor=0.5,
               max_time_rank=1)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def test_float_format_follows_nccl_tests_getfloatstr():
    assert nccltests_text._float_str(35.15, 7) == "  35.15"
    assert nccltests_text._float_str(453650.0, 7) == " 453650"
    assert nccltests_text._float_str(10094.0, 7) == "10094.0"
    assert nccltests_text._float_str(1234.56, 6) == "1234.6"
    assert nccltests_text._float_str(123456789.0, 7) == "1.2e+08"


def test_export_layout_and_footer():
    rows = [_row(), _row(placement=PLACEMENT_IN, time_us=1704.36, algbw_gbps=0.615, busbw_gbps=0.3075, wrong=None)]
    text = nccltests_text.format_text(rows)
    lines = text.splitlines()
    assert lines[0] == "# Collective test starting: all_gather_perf"
    header = [line for line in lines if "#wrong" in line][0]
    assert header.split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                              "time", "algbw", "busbw", "#wrong"]
    [data] = [line for line in lines if not line.startswith("#") and line.strip()]
    assert data == (
        "     1048576        131072     float    none      -1"
        "  2083.73    0.50    0.25       0  1704.36    0.61    0.31    N/A"
    )
    assert "# Out of bounds values : 0 OK" in lines
    assert "# Avg bus bandwidth    : 0.279555 " in lines  # %g of the mean busbw of both halves
    assert lines[-1] == "# Collective test concluded: all_gather_perf"


def test_export_reparses_to_the_same_printed_numbers():
    source = load_rows(FIXTURES / "all_gather_perf_bfloat16_2gpus.txt") + load_rows(
        FIXTURES / "all_reduce_perf_nccl2.18.3_wrong.txt"
    )
    text = nccltests_text.format_text(source)
    again = log_rows(text)
    keep = ("op", "placement", "size_bytes", "count", "dtype", "redop", "root", "world_size", "time_us",
            "algbw_gbps", "busbw_gbps", "wrong", "status")
    assert [tuple(getattr(r, k) for k in keep) for r in again] == [tuple(getattr(r, k) for k in keep) for r in source]
    assert nccltests_text.format_text(again) == text


def test_export_of_measured_rows_rounds_like_nccl_tests():
    rows = [_row(), _row(op="all_reduce", placement=PLACEMENT_IN, count=262144, redop="sum", busbw_factor=1.0,
                         time_us=2274.876, algbw_gbps=0.460937, busbw_gbps=0.460937)]
    again = log_rows(nccltests_text.format_text(rows))
    assert [(r.op, r.placement, r.time_us, r.algbw_gbps, r.busbw_gbps) for r in again] == [
        ("all_gather", PLACEMENT_OUT, 2083.73, 0.50, 0.25),
        ("all_reduce", PLACEMENT_IN, 2274.88, 0.46, 0.46),
    ]
    # what the nccl-tests layout has no place for comes back as nccl_bench wrote it in its comment lines
    assert {(r.backend, r.agg, r.world_size, r.iters) for r in again} == {("gloo", "max", 2, 50)}


def test_export_skips_points_that_were_not_measured():
    rows = [_row(), dataclasses.replace(_row(size_bytes=2097152), time_us=None, algbw_gbps=None, busbw_gbps=None,
                                        status="unsupported")]
    assert [r.size_bytes for r in log_rows(nccltests_text.format_text(rows))] == [1048576]


def test_a_host_or_device_recorded_with_a_newline_stays_in_its_rank_s_line():
    meta = {"hostnames": ["vm\n#  Rank  9 on forged", "vm"], "devices": ["cpu\r", "cpu"]}
    lines = nccltests_text.format_text([_row()], meta).splitlines()
    ranks = [line for line in lines if line.startswith("#  Rank")]
    assert ranks[0] == "#  Rank  0 on vm\\x0a#  Rank  9 on forged device [cpu\\x0d] nccl_bench gloo"
    assert len(ranks) == 2
