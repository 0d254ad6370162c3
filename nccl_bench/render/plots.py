"""Bandwidth and latency curves (matplotlib, Agg, optional extra `nccl-bench[plot]`).

`busbw_figure` is pure (rows in, Figure out, no pyplot global state), so tests can inspect the
lines; `figure_bytes` draws a figure in memory, and `write_plot` hands those bytes (PNG, SVG or PDF,
from the file name) to results' whole-file writer for `report --plot` and the sweep's busbw.png
(render/live.py); `figure_svg` gives the SVG text the HTML report inlines.

Readability rules: the data sets the y scale, the peak only when it is near the data
(otherwise it is a labelled note, so the curves are not squashed under it); latency on a log
axis; every series has its own colour and marker, so more than ten stay apart in grey print;
one legend outside both panels; numbers rounded for people (`peak 23.1 GB/s`).
"""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from nccl_bench.results.schema import ResultRow
from nccl_bench.results.whole_file import write_text_file
from nccl_bench.units.sizes import format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
MATPLOTLIB_MISSING = "matplotlib is not installed; pip install 'nccl-bench[plot]'"
# Latency, not bandwidth, is what matters up to about this size: the second panel shows it.
SMALL_MESSAGE_MAX_BYTES = 1024 * 1024
FIGURE_SIZE_IN = (12.0, 5.0)
FIGURE_DPI = 100  # 1200 x 500 pixels
PEAK_LABEL_PREFIX = "peak"
# The peak line joins the busbw scale only while the data reaches this share of it; further up
# it would flatten every curve against the x axis, so it becomes a note at the top instead.
PEAK_ON_SCALE_MIN_SHARE = 0.25
Y_HEADROOM = 1.08  # the highest point sits just under the top of the axes
# 10 colours x 12 markers. Series i and i+10 share a colour, so their markers are 5 places apart
# (a circle against a diamond, not against a hexagon); no (colour, marker) pair repeats before 40 series.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
TITLE_WRAP_CHARS = 90  # long run paths wrap rather than run off the figure
LEGEND_WRAP_CHARS = 44

Run = tuple[str, Sequence[ResultRow]]


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def round_gbps(value: float) -> str:
    """Three significant figures without an exponent: 23.1, 456, 1,234, 0.0123."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return f"{value:.3g}"


def series_style(index: int) -> tuple[str, str]:
    """(colour, marker) of the index-th series: both change, so neither alone must tell them apart."""
    return f"C{index % 10}", MARKERS[(index + 5 * (index // 10)) % len(MARKERS)]


def peak_on_scale(peak_gbps: float, data_max_gbps: float) -> bool:
    return data_max_gbps >= PEAK_ON_SCALE_MIN_SHARE * peak_gbps


def curve_label(run_label: str | None, op: str, placement: str | None) -> str:
    parts = [op] if placement is None else [f"{op} ({placement.replace('_', '-')})"]
    if run_label:
        parts.insert(0, f"{run_label}:")
    return " ".join(parts)


def curves(runs: Sequence[Run]) -> dict[str, list[ResultRow]]:
    """One curve per run x op (x placement, when an op was run both ways; x --split group), sorted
    by size; a --cycles run's cycles share their curve, so its spread shows at each size."""
    named: dict[str, list[ResultRow]] = {}
    several_runs = len(runs) > 1
    for run_label, rows in runs:
        placements: dict[str, set[str]] = {}
        for row in rows:
            placements.setdefault(row.op, set()).add(row.placement)
        for row in rows:
            placement = row.placement if len(placements[row.op]) > 1 else None
            key = curve_label(run_label if several_runs else None, row.op, placement)
            key += f" [{row.group}]" if row.group else ""
            key += f" [{row.variant}]" if row.variant else ""
            named.setdefault(key, []).append(row)
    return {key: sorted(points, key=lambda r: r.size_bytes) for key, points in named.items()}


def draws_a_curve(rows: Sequence[ResultRow]) -> bool:
    """Whether some curve of these rows has a bandwidth at two sizes or more: a sweep of one size per
    op would plot dots, which its table already says exactly, so the sweep draws no busbw.png then."""
    return any(len({r.size_bytes for r in points if r.busbw_gbps is not None}) >= 2
               for points in curves([("", rows)]).values())


def peak_of(runs: Sequence[Run], peak_gbps: float | None = None) -> float | None:
    if peak_gbps is not None:
        return peak_gbps
    peaks = {row.peak_gbps for _, rows in runs for row in rows if row.peak_gbps}
    return max(peaks) if peaks else None


def _size_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_xscale("log", base=2)
    axis.xaxis.set_major_locator(LogLocator(base=2, numticks=40))
    axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(int(round(x))) if x >= 1 else ""))
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.set_xlabel("message size (bytes, powers of 1024)")
    axis.grid(True, which="major", alpha=0.3)


def _thin_ticks(axis, sizes: list[float], max_labels: int) -> None:
    """Label every k-th power of two so at most max_labels labels show (1K, 4K, 16K ... on wide sweeps)."""
    from math import ceil, floor, log2

    sizes = [x for x in sizes if x >= 1]
    if not sizes:
        return
    first, last = ceil(log2(min(sizes))), floor(log2(max(sizes)))
    step = max(1, ceil((last - first + 1) / max_labels))
    axis.set_xticks([2.0**e for e in range(first, last + 1) if (e - first) % step == 0])


def plain_time_label(value: float, every_digit: bool = False) -> str:
    """Log-axis label in plain numbers at 1, 2 and 5 x 10^k (200, 1,000, 0.5), others unlabelled;
    every_digit labels 3, 4, 6 ... too, for an axis spanning less than a decade."""
    if value <= 0:
        return ""
    from math import floor, log10

    exponent = floor(round(log10(value), 9))  # 9.9999999 (a tick's float) is 10, not 9.99 x 10^0
    leading = round(value / 10**exponent, 6)
    if not every_digit and leading not in (1.0, 2.0, 5.0):
        return ""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def _log_time_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

    axis.set_yscale("log")

    def label(y: float, _pos) -> str:
        low, high = axis.get_ylim()
        return plain_time_label(y, every_digit=low > 0 and high / low < 10)

    formatter = FuncFormatter(label)
    low, high = axis.get_ylim()
    if low > 0 and high / low < 10:  # within one decade a log locator leaves stretches unmarked
        axis.yaxis.set_major_locator(MaxNLocator(nbins=6))
        axis.yaxis.set_minor_locator(NullLocator())
    axis.yaxis.set_major_formatter(formatter)
    axis.yaxis.set_minor_formatter(formatter)
    axis.grid(True, which="both", axis="y", alpha=0.2)


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)) or text


def busbw_figure(runs: Sequence[Run], peak_gbps: float | None = None, title: str | None = None) -> "Figure":
    """Bus bandwidth against size (left) and latency of small messages on a log axis (right)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGURE_SIZE_IN, dpi=FIGURE_DPI, layout="constrained")
    FigureCanvasAgg(figure)  # Agg without touching pyplot's global backend
    bw_axis, lat_axis = figure.subplots(1, 2, width_ratios=(3, 2))
    bw_sizes, lat_sizes, bw_max = [], [], 0.0
    for index, (label, points) in enumerate(curves(runs).items()):
        color, marker = series_style(index)  # the same style for a curve in both panels
        shown = _wrap(label, LEGEND_WRAP_CHARS)
        bw_points = [r for r in points if r.busbw_gbps is not None and r.size_bytes > 0]
        if bw_points:
            xs, ys = [r.size_bytes for r in bw_points], [r.busbw_gbps for r in bw_points]
            bw_axis.plot(xs, ys, marker=marker, markersize=4, label=shown, color=color)
            bw_sizes += xs
            bw_max = max(bw_max, *ys)
        small = [r for r in points if r.time_us is not None and 0 < r.size_bytes <= SMALL_MESSAGE_MAX_BYTES]
        if small:
            xs = [r.size_bytes for r in small]
            lat_axis.plot(xs, [r.time_us for r in small], marker=marker, markersize=4, label=shown, color=color)
            lat_sizes += xs
    _draw_peak(bw_axis, peak_of(runs, peak_gbps), bw_max)
    _size_axis(bw_axis)
    bw_axis.set_ylabel("bus bandwidth (GB/s, 1e9 B/s)")
    bw_axis.set_title("busbw vs message size")
    _thin_ticks(bw_axis, bw_sizes, max_labels=12)
    _size_axis(lat_axis)
    lat_axis.set_ylabel("time per op (us, log scale)")
    lat_axis.set_title(f"latency, messages <= {format_size(SMALL_MESSAGE_MAX_BYTES)}")
    if lat_sizes:
        _log_time_axis(lat_axis)
        _thin_ticks(lat_axis, lat_sizes, max_labels=7)
    else:
        lat_axis.text(0.5, 0.5, f"no messages <= {format_size(SMALL_MESSAGE_MAX_BYTES)}", ha="center", va="center",
                      transform=lat_axis.transAxes)
    handles, labels = bw_axis.get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside right upper", fontsize="small")
    if title:
        figure.suptitle(_wrap(title, TITLE_WRAP_CHARS))
    return figure


def _draw_peak(axis, peak: float | None, data_max: float) -> None:
    """A labelled dashed line when the peak is near the data; a note at the top when it is far above."""
    top = data_max * Y_HEADROOM if data_max > 0 else 1.0
    if peak is not None and peak_on_scale(peak, data_max):
        label = f"{PEAK_LABEL_PREFIX} {round_gbps(peak)} GB/s"
        axis.axhline(peak, linestyle="--", color="black", linewidth=1, label=label)
        top = max(top, peak * Y_HEADROOM)
    elif peak is not None:
        share = 100 * data_max / peak
        axis.annotate(
            f"{PEAK_LABEL_PREFIX} {round_gbps(peak)} GB/s is above this scale (best point: {share:.2g}% of it)",
            xy=(0.5, 1.0), xycoords="axes fraction", xytext=(0, -4), textcoords="offset points",
            ha="center", va="top", fontsize="small", arrowprops=None,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.6"},
        )
    axis.set_ylim(0, top)


def figure_bytes(figure: "Figure", suffix: str, dpi: float | None = FIGURE_DPI) -> bytes:
    """The figure drawn in memory as PNG, SVG or PDF (by suffix); the caller writes it where it belongs.
    dpi None keeps the figure's own."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=suffix.lstrip("."), **({} if dpi is None else {"dpi": dpi}))
    return buffer.getvalue()


def write_plot(runs: Sequence[Run], path: Path, peak_gbps: float | None = None, title: str | None = None) -> Path:
    """Save the figure as PNG, SVG or PDF, chosen by the suffix; raises ImportError without matplotlib."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise ValueError(f"{path}: a plot is written as {', '.join(PLOT_SUFFIXES)}")
    if title is None:
        title = " vs ".join(label for label, _ in runs)
    write_text_file(path, figure_bytes(busbw_figure(runs, peak_gbps=peak_gbps, title=title), suffix))
    return path


def figure_svg(runs: Sequence[Run], peak_gbps: float | None = None, title: str | None = None) -> str:
    """The figure as SVG text, for a self-contained HTML page (fonts as paths: no font files needed)."""
    return svg_of(lambda: busbw_figure(runs, peak_gbps=peak_gbps, title=title))


def svg_of(draw: Callable[[], "Figure"]) -> str:
    """A figure drawn as the <svg> element an HTML page inlines: text as paths, no XML prolog or DOCTYPE
    (not allowed inside HTML), no metadata (matplotlib's names a date and vocabulary URLs)."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "nccl-bench"}):
        svg = figure_bytes(draw(), ".svg").decode("utf-8")
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    return svg[svg.index("<svg"):]
