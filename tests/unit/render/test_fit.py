"""The column fitting every table uses: which columns stay, how wide, and that values stay whole."""

from __future__ import annotations

from nccl_bench.render.fit import WRAP_MIN_WIDTH, Column, choose_columns, fit, render_lines, share_width

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


def test_a_flag_in_a_table_sized_before_its_rows_keeps_readable_lines():
    """The live sweep sizes the flags column from its heading (5 wide); the flag of a point that needs more
    ranks than the run has must not fold one word per line: the last column has the rest of the line."""
    from nccl_bench.ranks.run_facts import RunFacts
    from nccl_bench.render.tables import live_layout, result_cells
    from nccl_bench.sweep.sweep_report import SweepHeader
    from tests.helpers.rows import row

    run = RunFacts(backend="gloo", launcher="torchrun", world_size=1, hostnames=("vm",), devices=("cpu",),
                   versions={}, run_dir=None)
    header = SweepHeader(run=run, sizes="1K", iterations="3", warmup=1, trials=1, dtype="float32", reduce_op="sum",
                         agg="max", planned=(("send_recv", 1024, 256),))
    unsupported = row(op="send_recv", size_bytes=1024, status="unsupported", flags="needs at least 2 ranks",
                      time_us=None, busbw=None, world_size=1)
    piped = live_layout(header, None).row_lines(result_cells(unsupported, ()))
    assert [line.plain.split("  ")[-1] for line in piped] == ["unsupported: needs at least 2 ranks"]
    for width in (80, 120, 200):
        lines = [line.plain for line in live_layout(header, width).row_lines(result_cells(unsupported, ()))]
        flag = [line.rstrip().rsplit("  ", 1)[-1].strip() for line in lines]
        assert " ".join(flag) == "unsupported: needs at least 2 ranks", width
        folded = flag[:-1]  # each folded part holds more than one short word: never one word per line
        assert all(len(part.split()) > 1 or len(part) >= WRAP_MIN_WIDTH for part in folded), lines
        assert all(len(line) <= width for line in lines)
