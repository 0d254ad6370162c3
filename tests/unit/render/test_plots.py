"""The busbw/latency figure, inspected as data (lines, labels, styles), and the PNG it saves."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from nccl_bench.render import plots
from nccl_bench.results.loader import load_rows
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT, ResultRow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def _row(op, placement, size, busbw, time_us=10.0, peak=None) -> ResultRow:
    return ResultRow(
        op=op, placement=placement, size_bytes=size, count=size // 4, dtype="float32", redop="sum", root=-1,
        world_size=2, nodes=1, backend="gloo", iters=10, trials=1, time_us=time_us, time_min_us=None,
        time_max_us=None, p50_us=None, p99_us=None, algbw_gbps=busbw, busbw_gbps=busbw, busbw_factor=1.0, wrong=0,
        slowest_rank=0, agg="max", peak_gbps=peak,
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_one_line_per_op_and_placement_when_both_exist():
    rows = [_row("all_reduce", PLACEMENT_IN, s, s / 1e6) for s in (1024, 1 << 20, 1 << 26)]
    rows += [_row("all_gather", p, s, s / 2e6) for p in (PLACEMENT_OUT, PLACEMENT_IN) for s in (1024, 1 << 26)]
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
    rows = [_row("all_reduce", PLACEMENT_IN, 1 << e, 1.0) for e in range(10, 31, 2)]
    figure = plots.busbw_figure([("run", rows)], peak_gbps=2.0)
    figure.canvas.draw()
    labels = [tick.get_text() for tick in figure.axes[0].get_xticklabels()]
    assert labels[0] == "1K" and "1M" in labels and labels[-1] == "1G"


def test_peak_is_a_dashed_line_from_the_rows_or_the_argument():
    rows = [_row("all_reduce", PLACEMENT_IN, 1 << 20, 3.0, peak=25.0)]
    [peak] = [line for line in plots.busbw_figure([("r", rows)]).axes[0].get_lines() if line.get_label().startswith("peak")]
    assert peak.get_linestyle() == "--" and list(peak.get_ydata()) == [25.0, 25.0]
    labels = [line.get_label() for line in plots.busbw_figure([("r", rows)], peak_gbps=50).axes[0].get_lines()]
    assert "peak 50 GB/s" in labels
    no_peak = [_row("all_reduce", PLACEMENT_IN, 1 << 20, 3.0)]
    assert not [line for line in plots.busbw_figure([("r", no_peak)]).axes[0].get_lines() if line.get_label().startswith("peak")]


def test_several_runs_are_told_apart_in_the_legend():
    ours = [_row("all_reduce", PLACEMENT_IN, 1 << 20, 3.0)]
    theirs = load_rows(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt")
    labels = [line.get_label() for line in plots.busbw_figure([("ours", ours), ("nccl-tests", theirs)]).axes[0].get_lines()]
    assert labels == ["ours: all_reduce", "nccl-tests: all_reduce (out-of-place)", "nccl-tests: all_reduce (in-place)"]


def test_write_plot_png_of_the_expected_size(tmp_path):
    rows = load_rows(FIXTURES / "all_gather_perf_bfloat16_2gpus.txt")
    path = plots.write_plot([("fixture", rows)], tmp_path / "p.png", peak_gbps=200)
    assert png_size(path) == (1200, 500)


def test_write_sweep_plot(tmp_path):
    rows = [_row("all_reduce", PLACEMENT_IN, s, s / 1e6) for s in (1024, 1 << 20)]
    path = plots.write_sweep_plot(rows, tmp_path)
    assert path == tmp_path / "busbw.png" and png_size(path) == (1200, 500)


def test_write_sweep_plot_without_matplotlib_returns_none(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    assert plots.write_sweep_plot([_row("all_reduce", PLACEMENT_IN, 1024, 1.0)], tmp_path) is None
    assert not (tmp_path / "busbw.png").exists()
