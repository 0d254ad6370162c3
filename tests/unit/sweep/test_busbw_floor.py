"""sweep --min-busbw: each op's busbw at its largest measured size against one floor."""

from __future__ import annotations

from nccl_bench.results.schema import STATUS_UNSUPPORTED
from nccl_bench.sweep import busbw_floor
from tests.helpers.rows import MiB, row


def test_the_floor_judges_each_ops_largest_measured_size_in_both_placements():
    rows = [row(size_bytes=MiB, time_us=10.0), row(size_bytes=4 * MiB, time_us=100.0),  # 104.9, 41.9 GB/s
            row(size_bytes=4 * MiB, time_us=50.0, placement="out_of_place"),  # 83.9 GB/s
            row(op="broadcast", size_bytes=MiB, time_us=20.0),  # 52.4 GB/s
            row(op="barrier", size_bytes=0, time_us=5.0, busbw_gbps=None, algbw_gbps=None, busbw_factor=None)]
    check = busbw_floor.check_floor(rows, 50.0)
    assert [(r.op, r.size_bytes, r.placement) for r in check.checked] == [
        ("all_reduce", 4 * MiB, "in_place"), ("all_reduce", 4 * MiB, "out_of_place"), ("broadcast", MiB, "in_place")]
    assert check.below == (rows[1],) and check.exit_code == 1  # the 1M row's 104.9 GB/s does not rescue it
    assert busbw_floor.floor_row_text(rows[1]) == "all_reduce 4M in_place: 41.94 GB/s"
    assert busbw_floor.check_floor(rows, 41.9).exit_code == 0 and busbw_floor.check_floor(rows, 41.9).below == ()
    assert check.unchecked_ops == ()


def test_a_size_that_measured_nothing_leaves_the_largest_measured_one_judged_and_an_op_without_any_is_named():
    rows = [row(size_bytes=MiB, time_us=10.0),
            row(size_bytes=4 * MiB, time_us=None, busbw_gbps=None, algbw_gbps=None, status=STATUS_UNSUPPORTED),
            row(op="all_to_all", time_us=None, busbw_gbps=None, algbw_gbps=None, status=STATUS_UNSUPPORTED)]
    check = busbw_floor.check_floor(rows, 200.0)
    assert [r.size_bytes for r in check.checked] == [MiB] and check.below == (rows[0],)
    assert check.unchecked_ops == ("all_to_all",)
