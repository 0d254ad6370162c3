"""Rich renderables for the terminal: the ops list, the run header, result rows, the summary.

Functions return renderables or strings; the CLI (or the LiveReporter it owns) prints them.
Columns and units follow nccl-tests so the two tables can sit side by side:
size in bytes, count in elements, time in microseconds, bandwidths in GB/s (1e9 bytes/s).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from nccl_bench.errors import first_line
from nccl_bench.ranks.collectives import REGISTRY
from nccl_bench.results.schema import STATUS_UNSUPPORTED, STATUS_WRONG, ResultRow
from nccl_bench.units import stats

# Under a pipe (CI logs, torchrun --tee) rich would assume 80 columns and wrap the table.
NON_TERMINAL_WIDTH = 160
PLACEMENT_LABEL = {"out_of_place": "out", "in_place": "in"}


def make_console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=max(console.width, NON_TERMINAL_WIDTH))
    return console


def ops_table() -> Table:
    table = Table(title="Collectives (sizes and bus-bandwidth factors as in nccl-tests)", box=box.SIMPLE_HEAD)
    for header in ("op", "what it does", "size means", "busbw factor", "placements", "redop", "root"):
        table.add_column(header)
    for collective in REGISTRY.values():
        table.add_row(
            collective.name,
            collective.summary,
            collective.size_meaning,
            collective.factor_formula,
            ", ".join(PLACEMENT_LABEL[p] for p in collective.placements),
            "yes" if collective.has_reduction else "-",
            "yes" if collective.has_root else "-",
        )
    return table


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _time(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"


def _wrong(row: ResultRow) -> Text:
    if row.wrong is None:
        return Text("N/A", style="dim")
    return Text(str(row.wrong), style="bold red" if row.wrong else "green")


def _notes(row: ResultRow) -> Text:
    if row.status == STATUS_UNSUPPORTED:
        return Text(f"unsupported: {row.flags}", style="yellow")
    text = Text(row.flags.replace(";", ", "), style="yellow")
    if row.status == STATUS_WRONG:
        text = Text("WRONG ", style="bold red") + text
    return text


@dataclass(frozen=True)
class _Column:
    header: str
    width: int
    render: Callable[[ResultRow], str | Text]
    justify: str = "right"


COLUMNS: tuple[_Column, ...] = (
    _Column("op", 14, lambda r: r.op, "left"),
    _Column("place", 5, lambda r: PLACEMENT_LABEL.get(r.placement, r.placement), "left"),
    _Column("size\n(B)", 13, lambda r: f"{r.size_bytes:,}"),
    _Column("count\n(elements)", 11, lambda r: f"{r.count:,}"),
    _Column("type", 8, lambda r: r.dtype, "left"),
    _Column("redop", 5, lambda r: r.redop, "left"),
    _Column("root", 4, lambda r: str(r.root)),
    _Column("iters", 6, lambda r: f"{r.iters:,}" if r.iters else "-"),
    _Column("time\n(us)", 9, lambda r: _time(r.time_us)),
    _Column("p50\n(us)", 9, lambda r: _time(r.p50_us)),
    _Column("algbw\n(GB/s)", 7, lambda r: _num(r.algbw_gbps)),
    _Column("busbw\n(GB/s)", 7, lambda r: _num(r.busbw_gbps)),
    _Column("%peak", 6, lambda r: _num(r.pct_of_peak, 1)),
    _Column("#wrong", 6, _wrong),
    _Column("notes", 0, _notes, "left"),
)


def _new_table(show_header: bool, title: str | None = None) -> Table:
    table = Table(box=box.SIMPLE_HEAD if show_header else None, show_header=show_header, title=title,
                  pad_edge=False, collapse_padding=False, show_edge=False)
    for column in COLUMNS:
        if column.width:
            table.add_column(column.header, justify=column.justify, width=column.width, no_wrap=True)
        else:  # the free-text column takes what is left of the line
            table.add_column(column.header, justify=column.justify, min_width=10)
    return table


def _add(table: Table, row: ResultRow) -> None:
    table.add_row(*(column.render(row) for column in COLUMNS))


def column_header() -> Table:
    """Just the header, printed once before rows stream in (fixed widths keep rows aligned)."""
    return _new_table(show_header=True)


def row_line(row: ResultRow) -> Table:
    table = _new_table(show_header=False)
    _add(table, row)
    return table


def results_table(rows: Iterable[ResultRow], title: str | None = None) -> Table:
    table = _new_table(show_header=True, title=title)
    for row in rows:
        _add(table, row)
    return table


def average_busbw(rows: Iterable[ResultRow]) -> dict[tuple[str, str], float]:
    """Mean busbw per (op, placement) over measured rows: nccl-tests' '# Avg bus bandwidth'."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.busbw_gbps is not None:
            groups[(row.op, row.placement)].append(row.busbw_gbps)
    return {key: stats.mean(values) for key, values in groups.items()}


def header_lines(header) -> list[str]:
    """The set-up, so a saved log says what was measured and how."""
    versions = ", ".join(f"{k} {v}" for k, v in header.versions.items())
    devices = _summarize(header.devices)
    lines = [
        f"# nccl_bench: backend {header.backend} via {header.launcher}, {header.world_size} ranks on "
        f"{header.nodes} node(s) ({', '.join(header.hostnames)})",
        f"# devices: {devices}",
        f"# versions: {versions}",
        f"# sizes: {header.sizes}; dtype {header.dtype}; redop {header.reduce_op}",
        f"# timing: warmup {header.warmup}, iterations {header.iterations}, trials {header.trials}, "
        f"ranks combined by {header.agg}; time = mean per op, p50 = median single op",
    ]
    if header.peak:
        lines.append(f"# peak: {header.peak}")
    if header.run_dir is not None:
        lines.append(f"# results: {header.run_dir}")
    lines.extend(f"# note: {note}" for note in header.notes)
    return lines


def _summarize(devices: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for device in devices:
        counts[device] = counts.get(device, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def summary_lines(summary) -> list[str]:
    lines = []
    for (op, placement), value in average_busbw(summary.rows).items():
        lines.append(f"# Avg bus bandwidth ({op}, {PLACEMENT_LABEL[placement]}): {value:.3f} GB/s")
    noisy = [r for r in summary.rows if "noisy" in r.flags]
    short = [r for r in summary.rows if "below_timer_resolution" in r.flags]
    if noisy:
        lines.append(
            f"# warning: {len(noisy)} row(s) vary more than 10% between trials; "
            "rerun with more --trials or a longer --min-sample-ms, on a quieter machine"
        )
    if short:
        lines.append(
            f"# warning: {len(short)} row(s) have samples too short for the timer; use --iters auto or more --iters"
        )
    empty = [r for r in summary.rows if "empty_cuda_graph" in r.flags]
    if empty:
        lines.append(
            f"# warning: {len(empty)} row(s) replayed an empty CUDA graph (NCCL queues no GPU work for them, "
            "as for an in-place op of one rank): their time is launch overhead, so no bandwidth is given"
        )
    if summary.wrong_total:
        lines.append(f"# ERROR: {summary.wrong_total} wrong element(s); the data check failed")
    if summary.plot_path is not None:
        lines.append(f"# plot: {summary.plot_path}")
    if summary.run_dir is not None:
        lines.append(f"# {summary.status}: {len(summary.rows)} row(s) in {summary.run_dir}")
    return lines


class LiveReporter:
    """Rank 0's observer: header, rows as they finish, a progress bar on a terminal, summary."""

    def __init__(self, console: Console | None = None):
        self.console = console or make_console()
        self._progress = None
        self._task = None

    def started(self, header, total_points: int) -> None:
        for line in header_lines(header):
            self.console.print(line, markup=False, highlight=False)
        self.console.print(column_header())
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=self.console, transient=True,
            )
            self._task = self._progress.add_task("sweep", total=total_points)
            self._progress.start()

    def row_done(self, row: ResultRow) -> None:
        self.console.print(row_line(row))
        if self._progress is not None:
            self._progress.advance(self._task)

    def finished(self, summary) -> None:
        if self._progress is not None:
            self._progress.stop()
        if summary.run_dir is not None:
            summary.plot_path = _write_plot(summary)
        for line in summary_lines(summary):
            self.console.print(line, markup=False, highlight=False)


def _write_plot(summary) -> Path | None:
    """busbw.png beside the CSV when matplotlib is installed; a plot never fails a run."""
    if not any(row.busbw_gbps is not None for row in summary.rows):
        return None
    try:
        from nccl_bench.render.plots import write_sweep_plot

        return write_sweep_plot(summary.rows, summary.run_dir, peak_gbps=summary.peak_gbps)
    except Exception as exc:  # a broken font cache or backend must not cost the measured rows
        summary.notes.append(f"busbw.png not written: {first_line(exc)}")
        return None
