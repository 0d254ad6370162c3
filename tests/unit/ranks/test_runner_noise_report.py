"""The end-of-run warnings say what to change when rows are noisy or too short for the timer."""

from __future__ import annotations

from functools import partial

from nccl_bench.render.tables import summary_lines
from nccl_bench.sweep.sweep_report import SweepSummary
from tests.helpers.rows import row

_row = partial(row, dtype="float32", iters=100, trials=3, time_us=10.0, time_min_us=9.0, time_max_us=12.0, p50_us=9.5,
               p99_us=20.0, busbw=1.0)


def test_noisy_and_short_rows_get_one_warning_each_with_a_next_step():
    summary = SweepSummary(run_dir=None, rows=[_row(size_bytes=1024, flags="noisy"),
                                               _row(size_bytes=2048, flags="noisy;below_timer_resolution"),
                                               _row(size_bytes=4096, flags="")], status="complete")
    lines = summary_lines(summary)
    noisy = [line for line in lines if "vary more than 10%" in line]
    short = [line for line in lines if "too short for the timer" in line]
    assert noisy == ["# warning: 2 row(s) vary more than 10% between trials; rerun with more --trials or a "
                     "longer --min-sample-ms, on a quieter machine"]
    assert len(short) == 1 and short[0].startswith("# warning: 1 row(s)") and "--iters" in short[0]


def test_quiet_rows_get_no_warning():
    lines = summary_lines(SweepSummary(run_dir=None, rows=[_row(size_bytes=1024, flags="")], status="complete"))
    assert not any("warning" in line for line in lines)
