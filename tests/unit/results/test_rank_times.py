"""ranks.csv read back for the heatmap: medians over trials, a bad line skipped with a warning, none without one."""

from __future__ import annotations

import pytest

from nccl_bench.results.input_lines import ResultsWarning
from nccl_bench.results.rank_times import RankPoint, read_rank_points
from tests.helpers.rows import row, write_ranks_run, write_run


def test_each_ranks_figures_are_the_median_over_the_trials(tmp_path):
    run = write_ranks_run(tmp_path / "run", (1024,), (10.0, 20.0))
    with open(run / "ranks.csv", "a") as handle:  # two more trials of the same point
        handle.write("all_reduce,in_place,1024,,,,1,0,30.0,4.0,0.5,0.0,1\nall_reduce,in_place,1024,,,,1,1,20.0,0.0,0.5,0.0,1\n"
                     "all_reduce,in_place,1024,,,,2,0,50.0,8.0,0.5,0.0,1\nall_reduce,in_place,1024,,,,2,1,20.0,0.0,0.5,0.0,1\n")
    assert read_rank_points(run) == read_rank_points(run / "results.csv") == [
        RankPoint("all_reduce", "in_place", "", "", 1024, (0, 1), (30.0, 20.0), (4.0, 0.0))]


def test_a_line_without_a_ranks_figures_is_skipped_with_one_warning(tmp_path):
    run = write_ranks_run(tmp_path / "run", (1024,), (10.0, 20.0))
    with open(run / "ranks.csv", "a") as handle:
        handle.write("all_reduce,in_place,2048,,,,0,0,nan,0.0,0.5,0.0,1\nall_reduce,in_place,2048,,,,0,1\n")
    with pytest.warns(ResultsWarning, match="2 line"):
        points = read_rank_points(run)
    assert [p.size_bytes for p in points] == [1024]


def test_a_run_without_ranks_csv_and_other_inputs_have_no_points(tmp_path):
    run = write_run(tmp_path / "old", [row()])
    assert read_rank_points(run) == read_rank_points(run / "results.csv") == []
    (tmp_path / "log.txt").write_text("x")
    (tmp_path / "ranks.csv").write_text("op\n")
    assert read_rank_points(tmp_path / "log.txt") == []  # a log's folder is not a run folder
