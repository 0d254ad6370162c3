"""The rank heatmap of report --plot and --html, from a hand-made ranks.csv: the late rank stands out."""

from __future__ import annotations

import pytest

from nccl_bench.render import html as page
from nccl_bench.render import rank_heatmap
from nccl_bench.results.loader import load_runs
from tests.helpers.png_files import png_pixels, png_size
from tests.helpers.rows import MiB, write_ranks_run, write_run

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

SIZES = (1024, 64 * 1024, MiB)
SLOW = (100.0, 100.0, 1000.0, 100.0)  # rank 2 spends 10x the others' time in the op


def _cell_colour(pixels, figure, axis, size_index: int, rank_index: int):
    x, y = axis.transData.transform((size_index, rank_index))
    return tuple(pixels[int(round(figure.bbox.height - y)), int(round(x))])


def test_a_rank_ten_times_slower_differs_in_its_row_of_the_png(tmp_path):
    run = write_ranks_run(tmp_path / "run", SIZES, SLOW)
    written = rank_heatmap.write_rank_plot([run], load_runs([run]), tmp_path / "busbw.png")
    assert written == tmp_path / "busbw-ranks.png" and png_size(written)[0] > 0
    # the same figure again, drawn, tells where each cell lies in the file's pixels
    [panel] = rank_heatmap.panels_of_runs([run], load_runs([run]))
    figure = rank_heatmap.rank_figure([panel], "run: every rank at every size")
    figure.canvas.draw()
    pixels = png_pixels(written)
    assert pixels.shape[:2] == (round(figure.bbox.height), round(figure.bbox.width))
    ratio_axis = figure.axes[0]
    for j in range(len(SIZES)):
        others = {_cell_colour(pixels, figure, ratio_axis, j, rank) for rank in (0, 1, 3)}
        assert len(others) == 1  # at the median: one colour
        assert _cell_colour(pixels, figure, ratio_axis, j, 2) not in others


def test_the_ratio_is_to_the_points_median_and_the_late_cells_are_the_named_ones(tmp_path):
    run = write_ranks_run(tmp_path / "run", SIZES, (400.0, 400.0, 100.0, 400.0), late_rank=2,
                          arrival_us=(0.0, 10.0, 300.0, 5.0))
    [panel] = rank_heatmap.panels_of_runs([run], load_runs([run]))
    assert panel.ranks == (0, 1, 2, 3) and panel.sizes == SIZES
    assert [row[0] for row in panel.log2_ratio] == [0.0, 0.0, -2.0, 0.0]  # a quarter of the median
    assert [row[0] for row in panel.lateness_us] == [0.0, 10.0, 300.0, 5.0] and not panel.by_gap
    assert panel.late_cells == {(2, j) for j in range(len(SIZES))}
    [line] = panel.late_text
    assert line.startswith("rank 2 (node002) arrived 300 us late at 1K-1M")


def test_a_run_without_ranks_csv_draws_no_heatmap_and_its_page_says_nothing_of_one(tmp_path):
    from tests.helpers.rows import row

    run = write_run(tmp_path / "old", [row(size_bytes=size) for size in SIZES])
    assert rank_heatmap.write_rank_plot([run], load_runs([run]), tmp_path / "busbw.png") is None
    assert not (tmp_path / "busbw-ranks.png").exists()
    text = page.html_report(page.pages_for([run], load_runs([run])))
    assert "ranks.csv" not in text and "every rank" not in text.lower()


def test_the_html_page_embeds_the_heatmap_and_escapes_the_runs_name(tmp_path):
    run = write_ranks_run(tmp_path / "run<b>&x", SIZES, SLOW)
    text = page.html_report(page.pages_for([run], load_runs([run])))
    heading = text.index("Every rank at every size (ranks.csv)")
    assert "data:image/png;base64," in text[heading:]  # the heatmap, inside the page's inline SVG
    assert "run<b>" not in text and "run&lt;b&gt;&amp;x" in text


def test_where_every_rank_has_a_gap_the_right_panel_shows_the_gap_beyond_the_median(tmp_path):
    """On CPU the rule names the rank whose own time outside the op exceeds the others' (units/arrivals):
    the picture shows that figure, not the aligned arrival offsets, which scatter by hundreds of
    microseconds there (here rank 1 arrived latest, rank 2 was the late one)."""
    run = write_ranks_run(tmp_path / "run", SIZES, (400.0, 400.0, 100.0, 400.0), late_rank=2,
                          arrival_us=(0.0, 900.0, 300.0, 5.0), gap_us=(4.0, 3.0, 404.0, 5.0))
    [panel] = rank_heatmap.panels_of_runs([run], load_runs([run]))
    assert panel.by_gap
    assert [row[0] for row in panel.lateness_us] == [0.0, 0.0, 399.5, 0.5]  # beyond the median gap, 4.5 us
    figure = rank_heatmap.rank_figure([panel])
    titles = [axis.get_title(loc="left") for axis in figure.axes]
    assert any("time outside the op before each call" in title for title in titles), titles
