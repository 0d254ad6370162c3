"""The busbw/latency figure, inspected as data (lines, labels, styles), and the PNG it saves."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from nccl_bench.render import plots
from nccl_bench.results.loader import load_rows
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT
from tests.helpers.png_files import png_size
from tests.helpers.rows import row

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"
_row = partial(row, dtype="float32", time_us=10.0, p50_us=None, p99_us=None)


def test_one_line_per_op_and_placement_when_both_exist():
    rows = [_row(size_bytes=s, busbw=s / 1e6) for s in (1024, 1 << 20, 1 << 26)]
    rows += [_row(op="all_gather", placement=p, size_bytes=s, busbw=s / 2e6)
             for p in (PLACEMENT_OUT, PLACEMENT_IN) for s in (1024, 1 << 26)]
    figure = plots.busbw_figure([("run", rows)])
    bw_axis, lat_axis = figure.axes
    assert [line.get_label() for line in bw_axis.get_lines()] == [
        "all_reduce", "all_gather (out-of-place)", "all_gather (in-place)",
    ]
    [all_reduce] = [line for line in bw_axis.get_lines() if line.get_label() == "all_reduce"]
    assert list(all_reduce.get_xdata()) == [1024, 1 << 20, 1 << 26]
    assert list(all_reduce.get_ydata()) == [1024 / 1e6, (1 << 20) / 1e6, (1 << 26) / 1e6]
    assert bw_axis.get_xscale() == "log"
    # the latency panel keeps only messages up to 1 MiB, in the same colours
    lat = {line.get_label(): line for line in lat_axis.get_lines()}
    assert list(lat["all_reduce"].get_xdata()) == [1024, 1 << 20]
    assert lat["all_reduce"].get_color() == all_reduce.get_color()


def test_size_labels_are_powers_of_1024():
    rows = [_row(size_bytes=1 << e, busbw=1.0) for e in range(10, 31, 2)]
    figure = plots.busbw_figure([("run", rows)], peak_gbps=2.0)
    figure.canvas.draw()
    labels = [tick.get_text() for tick in figure.axes[0].get_xticklabels()]
    assert labels[0] == "1K" and "1M" in labels and labels[-1] == "1G"


def _peak_lines(figure):
    return [line for line in figure.axes[0].get_lines() if line.get_label().startswith("peak")]


def test_peak_near_the_data_is_a_labelled_dashed_line_on_the_scale():
    rows = [_row(size_bytes=1 << 20, busbw=20.0, peak_gbps=23.14)]
    figure = plots.busbw_figure([("r", rows)])
    [peak] = _peak_lines(figure)
    assert peak.get_linestyle() == "--" and list(peak.get_ydata()) == [23.14, 23.14]
    assert peak.get_label() == "peak 23.1 GB/s"
    assert figure.axes[0].get_ylim() == (0, 23.14 * plots.Y_HEADROOM)
    figure = plots.busbw_figure([("r", rows)], peak_gbps=50)
    assert [line.get_label() for line in _peak_lines(figure)] == ["peak 50.0 GB/s"]
    no_peak = [_row(size_bytes=1 << 20, busbw=3.0)]
    assert not _peak_lines(plots.busbw_figure([("r", no_peak)]))


def test_peak_far_above_the_data_is_a_note_and_the_data_sets_the_scale():
    """CPU busbw of 0.69 GB/s against a 21.4 GB/s memcpy peak: the curves fill the axes."""
    rows = [_row(size_bytes=1 << 20, busbw=0.69, peak_gbps=21.43)]
    figure = plots.busbw_figure([("r", rows)])
    axis = figure.axes[0]
    assert not _peak_lines(figure)
    assert axis.get_ylim() == (0, 0.69 * plots.Y_HEADROOM)
    [note] = axis.texts
    assert note.get_text() == "peak 21.4 GB/s is above this scale (best point: 3.2% of it)"


def test_round_gbps_and_time_labels_exact():
    assert [plots.round_gbps(v) for v in (21.4307, 456.78, 1234.5, 2.345, 0.012345)] == [
        "21.4", "457", "1,234", "2.35", "0.0123"]
    assert [plots.plain_time_label(v) for v in (200.0, 1000.0, 300.0, 0.5, 50.0, 9.9999999999, 20.000000001)] == [
        "200", "1,000", "", "0.5", "50", "10", "20"]


def test_latency_is_on_a_log_axis_and_the_legend_sits_outside_both_panels():
    rows = [_row(size_bytes=s, busbw=s / 1e6, time_us=s / 100) for s in (1024, 1 << 16, 1 << 20)]
    figure = plots.busbw_figure([("run", rows)])
    bw_axis, lat_axis = figure.axes
    assert lat_axis.get_yscale() == "log" and bw_axis.get_yscale() == "linear"
    figure.canvas.draw()
    [legend] = figure.legends
    legend_box = legend.get_window_extent()
    assert legend_box.x0 >= max(bw_axis.get_window_extent().x1, lat_axis.get_window_extent().x1)


def test_more_than_ten_series_differ_in_colour_and_marker():
    ops = [f"op{i}" for i in range(14)]
    rows = [_row(op=op, size_bytes=1 << 20, busbw=1.0 + i) for i, op in enumerate(ops)]
    lines = plots.busbw_figure([("r", rows)]).axes[0].get_lines()
    styles = [(line.get_color(), line.get_marker()) for line in lines]
    assert len(styles) == 14 and len(set(styles)) == 14
    assert styles[10][0] == styles[0][0] and (styles[0][1], styles[10][1]) == ("o", "D")  # same colour, unlike marker
    assert len({plots.series_style(i) for i in range(40)}) == 40


def test_plot_formats_by_suffix(tmp_path):
    rows = [_row(size_bytes=s, busbw=s / 1e6) for s in (1024, 1 << 20)]
    assert plots.write_plot([("r", rows)], tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")
    assert plots.write_plot([("r", rows)], tmp_path / "p.pdf").read_bytes()[:5] == b"%PDF-"
    assert "<svg" in plots.figure_svg([("r", rows)])


def test_several_runs_are_told_apart_in_the_legend():
    ours = [_row(size_bytes=1 << 20, busbw=3.0)]
    theirs = load_rows(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt")
    figure = plots.busbw_figure([("ours", ours), ("nccl-tests", theirs)])
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["ours: all_reduce", "nccl-tests: all_reduce (out-of-place)", "nccl-tests: all_reduce (in-place)"]


def test_write_plot_png_of_the_expected_size(tmp_path):
    rows = load_rows(FIXTURES / "all_gather_perf_bfloat16_2gpus.txt")
    path = plots.write_plot([("fixture", rows)], tmp_path / "p.png", peak_gbps=200)
    assert png_size(path) == (1200, 500)


def test_runs_side_by_side_keep_a_whole_title_inside_the_figure():
    rows = [_row(size_bytes=s, busbw=s / 1e6) for s in (1024, 1 << 20)]
    runs = [("results/20261123T101500Z_all_reduce_all_gather_baseline_of_the_dgx_h100_nodes", rows),
            ("results/20261123T111500Z_all_reduce_all_gather_after_the_nccl_upgrade", rows)]
    figure = plots.busbw_figure(runs, title=" vs ".join(label for label, _ in runs))
    figure.canvas.draw()
    title = figure._suptitle
    assert title.get_text().replace("\n", " ") == " vs ".join(label for label, _ in runs)
    box, frame = title.get_window_extent(), figure.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1
