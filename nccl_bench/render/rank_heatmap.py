"""The rank heatmap of `report --plot` (a second file, NAME-ranks.png beside NAME.png) and `--html`: per op
and placement, rank x size, each rank's time in the op relative to the point's median (left) and, on the
right, what the late-rank rule judged (units/arrivals.py): where every rank has a gap (its own time outside
the op before each call, kept on CPU), its gap beyond the ranks' median; else its arrival offset on
aligned clocks. From ranks.csv (results/rank_times.py). A run without ranks.csv draws none.

Reading it (docs/report.md): the rank that arrives late spends the least time in the op, so its row is
blue on the left (below the median) and bright on the right (late); the ranks that waited for it are
red on the left. Cells where results.csv names a late rank (late_rank) are outlined in black.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nccl_bench.render import repeats
from nccl_bench.render.labels import placement_text
from nccl_bench.results.rank_times import RankPoint, read_rank_points
from nccl_bench.results.schema import ResultRow
from nccl_bench.results.whole_file import write_text_file
from nccl_bench.units import stats
from nccl_bench.units.arrivals import LATE_FLOOR_US
from nccl_bench.units.sizes import format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RANKS_SUFFIX = "-ranks"  # busbw.png -> busbw-ranks.png
# The ratio's colour scale reaches at least 0.5x-2x: a quiet run's few percent stay pale, not saturated.
MIN_LOG2_SPAN = 1.0
PANEL_WIDTH_IN = 12.0
# A panel's height: a band per rank, within readable bounds (1,024 ranks still fit one screen).
ROW_HEIGHT_IN, MIN_PANEL_IN, MAX_PANEL_IN = 0.22, 2.2, 8.0
LABEL_EVERY_RANK_MAX = 32  # more ranks than this: the axis labels some of them
MAX_SIZE_LABELS = 12
# The arrival scale reaches at least the least lateness the late-rank rule names: offsets of a few
# microseconds, a quiet run's, stay dark instead of spanning the whole scale.
MIN_ARRIVAL_SPAN_US = LATE_FLOOR_US
TITLE_WRAP_CHARS = 80  # a panel's title stays above its own heatmap
MISSING_COLOUR = "0.85"  # a rank without a figure at a size (another group's, a skipped point)
LATE_EDGE = "black"


@dataclass(frozen=True)
class Panel:
    """One op and placement (and group, variant) of one run, ready to draw: cells[rank][size]."""

    title: str
    sizes: tuple[int, ...]
    ranks: tuple[int, ...]
    log2_ratio: tuple[tuple[float, ...], ...]  # log2(time in op / the point's median over ranks); nan: none
    lateness_us: tuple[tuple[float, ...], ...]  # the right panel's figure: gap beyond the median, or arrival
    late_cells: frozenset[tuple[int, int]]  # (rank index, size index) that results.csv names late
    late_text: tuple[str, ...]  # the late lines the sweep's end prints, for these rows
    by_gap: bool = False  # lateness_us is each rank's gap beyond the ranks' median (else its arrival offset)


def rank_panels(label: str, points: Sequence[RankPoint], rows: Sequence[ResultRow]) -> list[Panel]:
    """One Panel per op, placement, group and variant with ranks.csv figures, in the order ranks.csv
    first names them; the late cells and lines from the run's rows."""
    by_panel: dict[tuple[str, str, str, str], list[RankPoint]] = {}
    for point in points:
        by_panel.setdefault(point.panel, []).append(point)
    return [_panel(label, key, found, [r for r in rows if (r.op, r.placement, r.group, r.variant) == key])
            for key, found in by_panel.items()]


def _panel(label: str, key: tuple[str, str, str, str], points: list[RankPoint], rows: list[ResultRow]) -> Panel:
    op, placement, group, variant = key
    sizes = tuple(sorted({p.size_bytes for p in points}))
    ranks = tuple(sorted({r for p in points for r in p.ranks}))
    ratio = [[math.nan] * len(sizes) for _ in ranks]
    lateness = [[math.nan] * len(sizes) for _ in ranks]
    rank_index, size_index = {r: i for i, r in enumerate(ranks)}, {s: j for j, s in enumerate(sizes)}
    by_gap = all(point.gap_us is not None for point in points)
    for point in points:
        median = stats.median(point.time_in_op_us)
        j = size_index[point.size_bytes]
        right = point.arrival_us
        if by_gap:
            middle = stats.median(point.gap_us)
            right = tuple(max(0.0, gap - middle) for gap in point.gap_us)
        for rank, in_op, figure in zip(point.ranks, point.time_in_op_us, right, strict=True):
            i = rank_index[rank]
            ratio[i][j] = math.log2(in_op / median) if in_op > 0 and median > 0 else math.nan
            lateness[i][j] = figure
    late = frozenset((rank_index[r.late_rank], size_index[r.size_bytes]) for r in rows
                     if r.late_rank in rank_index and r.size_bytes in size_index)
    where = ", ".join(part for part in (f"{op} {placement_text(placement)}", group, variant) if part)
    return Panel(f"{label}: {where}", sizes, ranks, tuple(map(tuple, ratio)), tuple(map(tuple, lateness)), late,
                 tuple(line.removeprefix("# ") for line in repeats.late_lines(rows)), by_gap)


def rank_figure(panels: Sequence[Panel], title: str | None = None) -> "Figure":
    """Two heatmaps per panel, one panel a row: time in the op / the point's median, arrival offset."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    heights = [min(MAX_PANEL_IN, max(MIN_PANEL_IN, ROW_HEIGHT_IN * len(p.ranks) + 1.2)) for p in panels]
    figure = Figure(figsize=(PANEL_WIDTH_IN, sum(heights) + 0.8), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.subplots(len(panels), 2, squeeze=False, height_ratios=heights)
    for panel, (ratio_axis, arrival_axis) in zip(panels, grid, strict=True):
        _draw_ratio(figure, ratio_axis, panel)
        _draw_arrival(figure, arrival_axis, panel)
        lines = [panel.title, *panel.late_text]
        heading = "\n".join(textwrap.fill(line, TITLE_WRAP_CHARS, break_on_hyphens=False) for line in lines)
        ratio_axis.set_title(_plain(heading), loc="left", fontsize="small")
    if title:
        figure.suptitle(_plain(title))
    return figure


def _draw_ratio(figure, axis, panel: Panel) -> None:
    import matplotlib
    from matplotlib.ticker import FixedLocator, FuncFormatter

    finite = [abs(v) for row in panel.log2_ratio for v in row if math.isfinite(v)]
    span = max([MIN_LOG2_SPAN, *finite])
    colours = matplotlib.colormaps["RdBu_r"].with_extremes(bad=MISSING_COLOUR)
    image = axis.imshow(panel.log2_ratio, cmap=colours, vmin=-span, vmax=span, aspect="auto",
                        interpolation="nearest")
    step = math.ceil(span / 4)  # powers of two: 0.5x 1x 2x, or 0.25x 1x 4x ...
    ticks = FixedLocator(range(-math.floor(span) // step * step, math.floor(span) + 1, step))
    bar = figure.colorbar(image, ax=axis, ticks=ticks, format=FuncFormatter(lambda v, _pos: f"{2.0 ** v:.3g}x"))
    bar.set_label("time in op / point's median", fontsize="small")
    _axes(axis, panel)


def _draw_arrival(figure, axis, panel: Panel) -> None:
    import matplotlib

    colours = matplotlib.colormaps["viridis"].with_extremes(bad=MISSING_COLOUR)
    finite = [v for row in panel.lateness_us for v in row if math.isfinite(v)]
    image = axis.imshow(panel.lateness_us, cmap=colours, vmin=0, vmax=max([MIN_ARRIVAL_SPAN_US, *finite]),
                        aspect="auto", interpolation="nearest")
    if panel.by_gap:
        label = "gap beyond the median (us)"
        title = "lateness: time outside the op before each call, beyond the ranks' median"
    else:
        label, title = "arrival offset (us)", "arrival: after the earliest rank (aligned clocks)"
    figure.colorbar(image, ax=axis).set_label(label, fontsize="small")
    axis.set_title(title, loc="left", fontsize="small")
    _axes(axis, panel)


def _axes(axis, panel: Panel) -> None:
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    step = max(1, math.ceil(len(panel.sizes) / MAX_SIZE_LABELS))
    axis.set_xticks(range(0, len(panel.sizes), step),
                    [format_size(s) for s in panel.sizes[::step]], rotation=45, ha="right", fontsize="small")
    axis.set_xlabel("message size (bytes)", fontsize="small")
    if len(panel.ranks) <= LABEL_EVERY_RANK_MAX:
        axis.yaxis.set_major_locator(FixedLocator(range(len(panel.ranks))))
    else:
        axis.yaxis.set_major_locator(MaxNLocator(nbins=16, integer=True))
    axis.yaxis.set_major_formatter(FuncFormatter(
        lambda y, _pos: str(panel.ranks[int(y)]) if 0 <= int(y) < len(panel.ranks) and y == int(y) else ""))
    axis.tick_params(axis="y", labelsize="small")
    axis.set_ylabel("rank", fontsize="small")
    for i, j in sorted(panel.late_cells):
        axis.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor=LATE_EDGE, linewidth=2))


def _plain(text: str) -> str:
    """Text from files shown as written: matplotlib would read a pair of $ as mathematics."""
    return text.replace("$", r"\$")


def panels_of_runs(paths: Sequence[Path], loaded: Sequence[tuple[str, Sequence[ResultRow]]]) -> list[Panel]:
    """Every panel of the runs whose folders hold a ranks.csv; [] when none does."""
    return [panel for path, (label, rows) in zip(paths, loaded, strict=True)
            for panel in rank_panels(label, read_rank_points(path), rows)]


def rank_plot_path(plot_path: Path) -> Path:
    """Where report --plot NAME.png puts the rank heatmap: NAME-ranks.png beside it."""
    return plot_path.with_name(f"{plot_path.stem}{RANKS_SUFFIX}{plot_path.suffix}")


def write_rank_plot(paths: Sequence[Path], loaded: Sequence[tuple[str, Sequence[ResultRow]]],
                    plot_path: Path) -> Path | None:
    """The rank heatmap beside report's plot (PNG, SVG or PDF, as the plot), or None: no input has a ranks.csv."""
    from nccl_bench.render.plots import figure_bytes

    panels = panels_of_runs(paths, loaded)
    if not panels:
        return None
    path = rank_plot_path(Path(plot_path))
    title = " vs ".join(label for label, _ in loaded) + ": every rank at every size"
    write_text_file(path, figure_bytes(rank_figure(panels, title), path.suffix.lower(), dpi=None))
    return path
