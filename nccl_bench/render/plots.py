"""Bandwidth and latency curves as PNG (matplotlib, Agg, optional extra `nccl-bench[plot]`).

`busbw_figure` is pure (rows in, Figure out, no pyplot global state), so tests can inspect the
lines; `write_plot` saves it; `write_sweep_plot` is what every sweep calls at its end and
returns None when matplotlib is not installed instead of failing the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nccl_bench.results.schema import ResultRow
from nccl_bench.units.sizes import format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SWEEP_PLOT = "busbw.png"
# Latency, not bandwidth, is what matters up to about this size: the second panel shows it.
SMALL_MESSAGE_MAX_BYTES = 1024 * 1024
FIGURE_SIZE_IN = (12.0, 5.0)
FIGURE_DPI = 100  # 1200 x 500 pixels
PEAK_LABEL_PREFIX = "peak"

Run = tuple[str, Sequence[ResultRow]]


def curve_label(run_label: str | None, op: str, placement: str | None) -> str:
    parts = [op] if placement is None else [f"{op} ({placement.replace('_', '-')})"]
    if run_label:
        parts.insert(0, f"{run_label}:")
    return " ".join(parts)


def curves(runs: Sequence[Run]) -> dict[str, list[ResultRow]]:
    """One curve per run x op (x placement, when an op was run both ways), sorted by size."""
    named: dict[str, list[ResultRow]] = {}
    several_runs = len(runs) > 1
    for run_label, rows in runs:
        placements: dict[str, set[str]] = {}
        for row in rows:
            placements.setdefault(row.op, set()).add(row.placement)
        for row in rows:
            placement = row.placement if len(placements[row.op]) > 1 else None
            key = curve_label(run_label if several_runs else None, row.op, placement)
            named.setdefault(key, []).append(row)
    return {key: sorted(points, key=lambda r: r.size_bytes) for key, points in named.items()}


def peak_of(runs: Sequence[Run], peak_gbps: float | None = None) -> float | None:
    if peak_gbps is not None:
        return peak_gbps
    peaks = {row.peak_gbps for _, rows in runs for row in rows if row.peak_gbps}
    return max(peaks) if peaks else None


def _size_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_xscale("log", base=2)
    axis.xaxis.set_major_locator(LogLocator(base=2, numticks=40))
    axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(int(round(x))) if x >= 1 else ""))
    axis.set_xlabel("message size (bytes, powers of 1024)")
    axis.grid(True, which="major", alpha=0.3)


def _thin_ticks(axis, max_labels: int) -> None:
    """Label every k-th power of two so at most max_labels labels show (1K, 4K, 16K ... on wide sweeps)."""
    from math import ceil, floor, log2

    # from the data, not the view limits, so the first label is the smallest size measured
    curves_only = [line for line in axis.get_lines() if not str(line.get_label()).startswith(PEAK_LABEL_PREFIX)]
    sizes = [x for line in curves_only for x in line.get_xdata() if x >= 1]
    if not sizes:
        return
    first, last = ceil(log2(min(sizes))), floor(log2(max(sizes)))
    step = max(1, ceil((last - first + 1) / max_labels))
    axis.set_xticks([2.0**e for e in range(first, last + 1) if (e - first) % step == 0])


def busbw_figure(runs: Sequence[Run], peak_gbps: float | None = None, title: str | None = None) -> "Figure":
    """Bus bandwidth against size (left) and latency of small messages (right)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGURE_SIZE_IN, dpi=FIGURE_DPI, layout="constrained")
    FigureCanvasAgg(figure)  # Agg without touching pyplot's global backend
    bw_axis, lat_axis = figure.subplots(1, 2, width_ratios=(3, 2))
    drawn_small = False
    for index, (label, points) in enumerate(curves(runs).items()):
        color = f"C{index % 10}"  # the same colour for a curve in both panels
        bw_points = [r for r in points if r.busbw_gbps is not None and r.size_bytes > 0]
        if bw_points:
            bw_axis.plot([r.size_bytes for r in bw_points], [r.busbw_gbps for r in bw_points], marker="o",
                         markersize=3, label=label, color=color)
        small = [r for r in points if r.time_us is not None and 0 < r.size_bytes <= SMALL_MESSAGE_MAX_BYTES]
        if small:
            lat_axis.plot([r.size_bytes for r in small], [r.time_us for r in small], marker="o", markersize=3,
                          label=label, color=color)
            drawn_small = True
    peak = peak_of(runs, peak_gbps)
    if peak is not None:
        bw_axis.axhline(peak, linestyle="--", color="black", linewidth=1, label=f"{PEAK_LABEL_PREFIX} {peak:g} GB/s")
    _size_axis(bw_axis)
    bw_axis.set_ylabel("bus bandwidth (GB/s, 1e9 B/s)")
    bw_axis.set_title("busbw vs message size")
    bw_axis.set_ylim(bottom=0)
    if bw_axis.lines:
        bw_axis.legend(fontsize="small")
        _thin_ticks(bw_axis, max_labels=12)
    _size_axis(lat_axis)
    lat_axis.set_ylabel("time per op (us)")
    lat_axis.set_title(f"latency, messages <= {format_size(SMALL_MESSAGE_MAX_BYTES)}")
    if drawn_small:
        lat_axis.set_ylim(bottom=0)
        _thin_ticks(lat_axis, max_labels=7)
    else:
        lat_axis.text(0.5, 0.5, f"no messages <= {format_size(SMALL_MESSAGE_MAX_BYTES)}", ha="center", va="center",
                      transform=lat_axis.transAxes)
    if title:
        figure.suptitle(title)
    return figure


def write_plot(runs: Sequence[Run], path: Path, peak_gbps: float | None = None, title: str | None = None) -> Path:
    """Save the figure as PNG; raises ImportError when matplotlib is missing."""
    figure = busbw_figure(runs, peak_gbps=peak_gbps, title=title)
    path = Path(path)
    figure.savefig(path, format="png", dpi=FIGURE_DPI)
    return path


def write_sweep_plot(rows: list[ResultRow], run_dir: Path, peak_gbps: float | None = None) -> Path | None:
    """run_dir/busbw.png, or None when matplotlib is not installed (a sweep never fails for a plot)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    run_dir = Path(run_dir)
    return write_plot([(run_dir.name, rows)], run_dir / SWEEP_PLOT, peak_gbps=peak_gbps, title=run_dir.name)
