"""The column fitting every table uses: which columns stay, how wide, and that values stay whole."""

from __future__ import annotations

from nccl_bench.render.fit import Column, choose_columns, fit, render_lines, share_width

COLUMNS = (
    Column("op", align="left"),
    Column("size", "(B)"),
    Column("count", "(elements)", priority=2),
    Column("root", priority=3),
    Column("busbw", "(GB/s)", priority=0),
    Column("flags", align="left", wrap=True),
)
ROWS = [["all_reduce", "1,048,576", "262,144", "-1", "0.69", ""],
        ["reduce_scatter", "1,024", "128", "-1", "0.00", "noisy, below_timer_resolution"]]


def test_priority_zero_stays_and_the_rest_join_in_priority_order_while_they_fit():
    widths = [14, 9, 10, 4, 6, 29]
    assert choose_columns(widths, COLUMNS, None) == [0, 1, 2, 3, 4, 5]
    # op 14 + size 9 + busbw 6 + flags at its floor 12, three gaps: 47; count (+12) does not fit 55, and
    # root, though narrow enough, is less important than count: it never shows while count is left out
    assert choose_columns(widths, COLUMNS, 55) == [0, 1, 4, 5]
    assert choose_columns(widths, COLUMNS, 59) == [0, 1, 2, 4, 5]
    assert choose_columns(widths, COLUMNS, 65) == [0, 1, 2, 3, 4, 5]
    assert choose_columns(widths, COLUMNS, 20) == [0, 1, 4, 5]  # too narrow: the essentials still print whole


def test_share_width_gives_folding_columns_the_spare_equally():
    assert share_width([10, 30, 40], [False, True, True], [0, 12, 12], spare=50) == [10, 25, 25]
    assert share_width([10, 20, 40], [False, True, True], [0, 12, 12], spare=50) == [10, 20, 30]  # one needs less
    assert share_width([10, 30], [False, True], [0, 12], spare=5) == [10, 12]  # never under the floor


def test_lines_keep_every_value_whole_and_aligned():
    lines = [line.plain for line in render_lines(COLUMNS, ROWS, 56, margin="  ", header_mark="# ")]
    assert lines[0] == "# op                   size   busbw  flags"
    assert lines[1] == "#                       (B)  (GB/s)"
    assert lines[2] == "  all_reduce      1,048,576    0.69"
    assert lines[3] == "  reduce_scatter      1,024    0.00  noisy,"  # flags fold, word by word
    assert lines[4].strip() == "below_timer_resolution"
    assert all(len(line) <= 56 or "below_timer_resolution" in line for line in lines)
    assert fit(COLUMNS, ROWS, 56, margin="  ").left_out == ("count", "root")
    assert fit(COLUMNS, ROWS, 62, margin="  ").left_out == ("root",)
