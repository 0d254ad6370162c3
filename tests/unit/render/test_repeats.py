"""Runs that repeat points: the cycle line, the spread across cycles, the slowest group, the extra columns."""

from __future__ import annotations

from nccl_bench.render import formats, repeats, tables
from tests.helpers.rows import MiB, row


def test_the_cycle_line_says_where_a_run_is():
    assert repeats.cycle_line(2, 5) == "# cycle 2 of 5"
    assert repeats.cycle_line(7, 0) == "# cycle 7 (until interrupted)"


def test_the_spread_names_each_point_s_minimum_and_its_cycle():
    rows = [row(time_us=t, cycle=c) for c, t in ((1, 100.0), (2, 400.0), (3, 200.0))]  # busbw 10.49, 2.62, 5.24
    rows.append(row(size_bytes=2 * MiB, time_us=100.0, cycle=1))  # one cycle only: no spread to tell
    assert repeats.cycle_spread_lines(rows) == [
        "# busbw across 3 cycles (GB/s): min (its cycle) / median / max",
        "#   all_reduce in 1M: 2.621 (cycle 2) / 5.243 / 10.486",
    ]
    assert repeats.cycle_spread_lines([row(), row()]) == []  # no cycles: nothing


def test_the_slowest_group_per_point():
    rows = [row(group="div:2 group 0", time_us=100.0), row(group="div:2 group 1", time_us=300.0)]
    assert repeats.slowest_group_lines(rows) == [
        "# slowest group per point:",
        "#   all_reduce in 1M: div:2 group 1 at 3.495 GB/s (median of 2 groups 6.991)",
    ]
    assert repeats.slowest_group_lines(rows[:1]) == []


def test_repeat_columns_appear_only_in_runs_that_have_them():
    plain = formats.to_markdown([row()]).splitlines()[0]
    assert "cycle" not in plain and "group" not in plain
    both = formats.to_markdown([row(cycle=3, group="rail 1")]).splitlines()
    assert both[0].startswith("| op | group | cycle | placement |")
    assert both[2].startswith("| all_reduce | rail 1 | 3 | in |")
    assert [line.plain for line in tables.results_lines([row(cycle=1)], None)][0].split()[1:4] == [
        "op", "cycle", "placement"]


def test_each_split_group_is_a_curve_of_its_own():
    from nccl_bench.render.plots import curves

    rows = [row(group=g, size_bytes=s) for g in ("rail 0", "rail 1") for s in (MiB, 2 * MiB)]
    assert {key: len(points) for key, points in curves([("run", rows)]).items()} == {
        "all_reduce [rail 0]": 2, "all_reduce [rail 1]": 2}


def test_the_late_rank_is_named_once_per_op_with_its_sizes():
    late = dict(late_rank=2, late_host="node002", flags="late")
    rows = [row(size_bytes=1024, late_us=300.0, **late), row(size_bytes=65536, late_us=320.0, **late),
            row(size_bytes=MiB), row(op="all_gather", size_bytes=1024)]
    assert repeats.late_lines(rows) == [
        "# rank 2 (node002) arrived 310 us late at 1K-64K (all_reduce in, 2 of 3 sizes): "
        "the others waited for it inside the op"]
    assert repeats.late_lines(rows[2:]) == []
