"""Terminal tables: the ops list, the run header, result rows, the summary.

Functions return lines (rich Text, laid out by render/fit.py so no value is ever cut); render/live.py
prints them. Columns and units follow nccl-tests so the two tables
can sit side by side: size in bytes, count in elements, time in microseconds, bandwidths in GB/s
(1e9 bytes/s); their names come from render/labels.py.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from rich.text import Text

from nccl_bench.hardware.nvls import NVLS_FLAG, nvls_sentence
from nccl_bench.ranks.runner import FLAG_EMPTY_GRAPH
from nccl_bench.render import labels, repeats
from nccl_bench.render.escape import one_line
from nccl_bench.render.fit import WRAP_MIN_WIDTH, Cell, Column, Layout, fit, fit_widths, natural_width, widen
from nccl_bench.render.labels import placement_text
from nccl_bench.results.loader import RESULTS_LINE
from nccl_bench.results.schema import STATUS_UNSUPPORTED, STATUS_WRONG, ResultRow
from nccl_bench.sweep.rows import CALL_BOUND_FACTOR, FLAG_CALL_BOUND, FLAG_ONE_RANK_IN_PLACE
from nccl_bench.sweep.sweep_config import option_name
from nccl_bench.units import stats
from nccl_bench.units.op_table import OPS
from nccl_bench.units.sizes import format_size

_OPS_COLUMNS = (
    Column("op", align="left"),
    Column("what it does", align="left", wrap=True),
    Column("size means", align="left", wrap=True),
    Column("busbw factor", align="left"),
    Column("placements", align="left", priority=1),
    Column("redop", align="left", priority=2),
    Column("root", align="left", priority=3),
)


def ops_lines(width: int | None) -> list[Text]:
    """Every collective, its size meaning and bus-bandwidth factor, fitted to `width`."""
    rows = [
        [
            collective.name,
            collective.summary,
            collective.size_meaning,
            collective.factor_formula,
            ", ".join(placement_text(p) for p in collective.placements),
            "yes" if collective.reduces else "-",
            "yes" if collective.rooted else "-",
        ]
        for collective in OPS.values()
    ]
    lines = [Text("Collectives (sizes and bus-bandwidth factors as in nccl-tests)")]
    layout = fit(_OPS_COLUMNS, rows, width)
    lines += layout.header_lines()
    for row in rows:
        row_lines = layout.row_lines(row)
        lines += row_lines
        if width is not None and len(row_lines) > 1:
            lines.append(Text(""))  # folded rows need a gap to read as separate rows
    return lines


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


def flags_text(row: ResultRow) -> str:
    """The flags column for people: the reason of an unsupported row, WRONG first on a failed check."""
    if row.status == STATUS_UNSUPPORTED:
        return f"unsupported: {row.flags}"
    text = row.flags.replace(";", ", ")
    if row.status == STATUS_WRONG:
        text = ("WRONG " + text).strip()
    return text


def _flags(row: ResultRow) -> Text:
    style = "bold red" if row.status == STATUS_WRONG else "yellow"
    return Text(flags_text(row), style=style)


def _result_column(key: str, priority: int, width: int = 0, align: str = "right", wrap: bool = False) -> Column:
    return Column(labels.name(key), labels.unit(key), align, priority, wrap, width)


# The results table. Priority says what leaves first on a narrow terminal (largest number
# first): op, size, time, busbw and flags always stay; then placement, algbw, %peak, #wrong,
# p50, iters, count, type, redop, root, p95, p99. Least widths hold the widest value a sweep normally
# prints, so a streamed row lines up with the header printed before any value was known.
_RESULT_COLUMNS: tuple[tuple[Column, Callable[[ResultRow], Cell]], ...] = (
    (_result_column("op", 0, align="left"), lambda r: r.op),
    (_result_column("placement", 1, align="left"), lambda r: placement_text(r.placement)),
    (_result_column("size_bytes", 0), lambda r: f"{r.size_bytes:,}"),
    (_result_column("count", 7), lambda r: f"{r.count:,}"),
    (_result_column("dtype", 8, align="left"), lambda r: r.dtype),
    (_result_column("redop", 9, align="left"), lambda r: r.redop),
    (_result_column("root", 10), lambda r: str(r.root)),
    (_result_column("iters", 6, width=7), lambda r: f"{r.iters:,}" if r.iters else "-"),
    (_result_column("time_us", 0, width=9), lambda r: _time(r.time_us)),
    (_result_column("p50_us", 5, width=9), lambda r: _time(r.p50_us)),
    (_result_column("p95_us", 11, width=9), lambda r: _time(r.p95_us)),
    (_result_column("p99_us", 12, width=9), lambda r: _time(r.p99_us)),
    (_result_column("algbw_gbps", 2, width=7), lambda r: _num(r.algbw_gbps)),
    (_result_column("busbw_gbps", 0, width=7), lambda r: _num(r.busbw_gbps)),
    (_result_column("pct_of_peak", 3, width=6), lambda r: _num(r.pct_of_peak, 1)),
    (_result_column("wrong", 4), _wrong),
    (_result_column("flags", 0, align="left", wrap=True), _flags),
)
# Columns of runs that measure a point more than once (--split groups, --cycles passes): shown after
# the op, and only when a run has them, so a plain sweep's table stays nccl-tests' own.
_REPEAT_COLUMNS: dict[str, tuple[Column, Callable[[ResultRow], Cell]]] = {
    "group": (_result_column("group", 0, align="left"), lambda r: r.group or "-"),
    "cycle": (_result_column("cycle", 0, width=5), lambda r: "-" if r.cycle is None else str(r.cycle)),
    "variant": (_result_column("variant", 0, align="left"), lambda r: r.variant or "-"),
    "algo": (_result_column("algo", 1, align="left"), lambda r: r.algo or "-"),
    "proto": (_result_column("proto", 1, align="left"), lambda r: r.proto or "-"),
}
MARGIN = "  "  # rows are indented; header lines start with '#', so `grep -v '^#'` leaves the rows
HEADER_MARK = "# "


def repeats_in(rows: Iterable[ResultRow]) -> tuple[str, ...]:
    """The repeat columns ('group', 'cycle') that any of the rows fills."""
    rows = list(rows)
    filled = {"group": any(r.group for r in rows), "cycle": any(r.cycle is not None for r in rows),
              "variant": any(r.variant for r in rows), "algo": any(r.algo for r in rows),
              "proto": any(r.proto for r in rows)}
    return tuple(key for key in _REPEAT_COLUMNS if filled[key])


def repeats_streamed(rows: Iterable[ResultRow]) -> tuple[str, ...]:
    """repeats_in over a stream of rows, holding one row at a time."""
    filled: set[str] = set()
    for row in rows:
        filled.update(repeats_in([row]))
        if len(filled) == len(_REPEAT_COLUMNS):
            break
    return tuple(key for key in _REPEAT_COLUMNS if key in filled)


def _pairs(repeats: Sequence[str]) -> tuple[tuple[Column, Callable[[ResultRow], Cell]], ...]:
    extra = tuple(_REPEAT_COLUMNS[key] for key in _REPEAT_COLUMNS if key in repeats)
    return _RESULT_COLUMNS[:1] + extra + _RESULT_COLUMNS[1:]


def result_columns(repeats: Sequence[str] = ()) -> tuple[Column, ...]:
    return tuple(column for column, _ in _pairs(repeats))


def result_cells(row: ResultRow, repeats: Sequence[str] = ()) -> list[Cell]:
    return [cell(row) for _, cell in _pairs(repeats)]


def results_layout(rows: Sequence[ResultRow], width: int | None, repeats: Sequence[str] | None = None) -> Layout:
    repeats = repeats_in(rows) if repeats is None else repeats
    return fit(result_columns(repeats), [result_cells(r, repeats) for r in rows], width, MARGIN, HEADER_MARK)


def results_lines(rows: Sequence[ResultRow], width: int | None, title: str | None = None) -> list[Text]:
    """A run's table: the same lines the live sweep printed for it when both are piped."""
    repeats = repeats_in(rows)
    cells = [result_cells(r, repeats) for r in rows]
    layout = fit(result_columns(repeats), cells, width, MARGIN, HEADER_MARK)
    lines = [Text(one_line(f"# run: {title}"))] if title else []
    lines += layout.header_lines()
    for row_cells in cells:
        lines += layout.row_lines(row_cells)
    if layout.left_out:
        lines.append(Text(left_out_note(layout, width)))
    return lines


def results_lines_streamed(
    read: Callable[[], Iterable[ResultRow]], width: int | None, title: str | None = None
) -> Iterator[Text]:
    """results_lines in two passes over the rows, `read()` giving them each time: the widths (and the
    repeat columns any row fills), then the lines. Memory holds one row, never the table, and the lines
    are the same as results_lines'."""
    every = tuple(_REPEAT_COLUMNS)
    widths = [natural_width(column) for column in result_columns(every)]
    filled: set[str] = set()
    for row in read():
        widen(widths, result_cells(row, every))
        filled.update(repeats_in([row]))
    repeats = tuple(key for key in every if key in filled)  # the columns results_lines would show
    kept = [i for i, column in enumerate(result_columns(every)) if column in result_columns(repeats)]
    layout = fit_widths(result_columns(repeats), [widths[i] for i in kept], width, MARGIN, HEADER_MARK)
    if title:
        yield Text(one_line(f"# run: {title}"))
    yield from layout.header_lines()
    for row in read():
        yield from layout.row_lines(result_cells(row, repeats))
    if layout.left_out:
        yield Text(left_out_note(layout, width))


def left_out_note(layout: Layout, width: int | None) -> str:
    return f"# not shown at {width} columns: {', '.join(layout.left_out)} (a wider terminal or a pipe shows them)"


def live_layout(header, width: int | None) -> Layout:
    """Widths fixed before any row exists, from what the plan knows (ops, sizes, counts, type)."""
    known = [
        ResultRow(op=op, placement="out_of_place", size_bytes=size, count=count, dtype=header.dtype,
                  redop=header.reduce_op, root=-1, world_size=header.run.world_size, nodes=header.run.nodes,
                  backend=header.run.backend,
                  iters=0, trials=0, time_us=None, time_min_us=None, time_max_us=None, p50_us=None, p99_us=None,
                  algbw_gbps=None, busbw_gbps=None, busbw_factor=None, wrong=None, max_time_rank=None, agg=header.agg,
                  variant=header.variant)
        for op, size, count in header.planned
    ]
    columns = result_columns(header.repeats)
    cells = [result_cells(row, header.repeats) for row in known]
    widths = [natural_width(column, [row[i] for row in cells]) for i, column in enumerate(columns)]
    # A row's flags are not known before it is measured: room for one is kept, so a flag never runs past the line.
    widths = [max(w, WRAP_MIN_WIDTH) if column.wrap else w for column, w in zip(columns, widths, strict=True)]
    return fit_widths(columns, widths, width, MARGIN, HEADER_MARK)


def average_busbw(rows: Iterable[ResultRow]) -> dict[tuple[str, str], float]:
    """Mean busbw per (op, placement) over measured rows: nccl-tests' '# Avg bus bandwidth'."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.busbw_gbps is not None:
            groups[(row.op, row.placement)].append(row.busbw_gbps)
    return {key: stats.mean(values) for key, values in groups.items()}


def header_lines(header) -> list[str]:
    """The set-up, so a saved log says what was measured and how."""
    run = header.run
    lines = [
        f"# nccl_bench: backend {run.backend} via {run.launcher}, {run.world_size} ranks on "
        f"{run.nodes} node(s) ({', '.join(run.hosts)})",
        f"# devices: {_summarize(run.devices)}",
        versions_line(run.versions),
        *setup_lines(run.timings),
        f"# sizes: {header.sizes}; dtype {header.dtype}; redop {header.reduce_op}",
        f"# timing: warmup {header.warmup}, iterations {header.iterations}, trials {header.trials}, "
        f"ranks combined by {header.agg}; time = mean per op, p50 = median single op",
    ]
    if header.peak:
        lines.append(f"# peak: {header.peak}")
    return [one_line(line) for line in lines + header_tail(run.run_dir, header.notes)]


def versions_line(versions: dict[str, str]) -> str:
    """The versions line of every command's header."""
    return f"# versions: {', '.join(f'{k} {v}' for k, v in versions.items())}"


SETUP_NAMES = (("init_s", "process group"), ("first_op_s", "first collective"), ("split_s", "split groups"))


def setup_lines(timings: dict[str, float]) -> list[str]:
    """The set-up costs of every command's header: what NCCL spends before the first measured op."""
    parts = [f"{name} {_seconds(timings[key])}" for key, name in SETUP_NAMES if key in timings]
    return [f"# set-up (slowest rank): {', '.join(parts)}"] if parts else []


def _seconds(value: float) -> str:
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def header_tail(run_dir: Path | None, notes: Iterable[str]) -> list[str]:
    """How every command's header ends: the run folder (the line `report` follows from a saved log), then notes."""
    lines = [] if run_dir is None else [f"{RESULTS_LINE}{run_dir}"]
    return [one_line(line) for line in lines + [f"# note: {note}" for note in notes]]


def sample_span(rows: Iterable[ResultRow]) -> tuple[float, float, ResultRow] | None:
    """Shortest and longest timed sample in ms, and the row of the shortest.

    A row's fastest trial lasted time_min_us x iters (ranks combined as the row says), so this
    is what every row's samples at least lasted: the truth behind `--iters auto`'s target.
    """
    timed = [(r.time_min_us * r.iters / 1e3, r) for r in rows if r.time_min_us is not None and r.iters]
    if not timed:
        return None
    shortest = min(timed, key=lambda pair: pair[0])
    return shortest[0], max(ms for ms, _ in timed), shortest[1]


def _summarize(devices: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for device in devices:
        counts[device] = counts.get(device, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def nvls_lines(rows: Iterable[ResultRow]) -> list[str]:
    """Per op whose busbw passed the links' peak on an NVSwitch system: NVLS named, not a bare %peak over 100."""
    top: dict[str, float] = {}
    for row in rows:
        if NVLS_FLAG in row.flags.split(";") and row.pct_of_peak is not None:
            top[row.op] = max(top.get(row.op, 0.0), row.pct_of_peak)
    return [f"# note: {nvls_sentence(op, pct)}" for op, pct in top.items()]


def call_bound_note(count: int, remedy: str) -> str:
    """What `count` rows flagged call_bound measure (sweep/rows.CALL_BOUND_FACTOR), and `remedy`: how to see
    NCCL's own latency instead."""
    return (f"{count} row(s) are call_bound: their median call is within {CALL_BOUND_FACTOR}x of the same op's "
            "smallest message, so they measure what a call costs, not bandwidth; for NCCL's own latency without "
            f"torch's launch path, {remedy}")


def no_bandwidth_warnings(flags: Sequence[str]) -> list[str]:
    """Why rows with these flags (each row's `;`-joined flags) were given no bandwidth (sweep/rows.bandwidths),
    the sweep's and the replay's alike."""
    warnings = []
    empty = sum(FLAG_EMPTY_GRAPH in row.split(";") for row in flags)
    if empty:
        warnings.append(f"{empty} row(s) replayed an empty CUDA graph (NCCL queues no GPU work for them, as for an "
                        "in-place op of one rank): their time is launch overhead, so no bandwidth is given")
    alone = sum(FLAG_ONE_RANK_IN_PLACE in row.split(";") for row in flags)
    if alone:
        warnings.append(f"{alone} in-place row(s) of one rank measure nothing (the collective has nothing to move: "
                        "NCCL queues no GPU work for it, or for avg of floating-point data only a multiply by 1 of "
                        "the rank's own buffer): their time is call overhead, so no bandwidth is given")
    return warnings


def summary_lines(summary) -> list[str]:
    lines = []
    for (op, placement), value in average_busbw(summary.rows).items():
        lines.append(f"# Avg bus bandwidth ({op}, {placement_text(placement)}): {value:.3f} GB/s")
    lines += [f"# expected: {sentence}" for sentence in summary.expected]
    lines += nvls_lines(summary.rows)
    noisy = [r for r in summary.rows if "noisy" in r.flags]
    short = [r for r in summary.rows if "below_timer_resolution" in r.flags]
    if noisy:
        lines.append(
            f"# warning: {len(noisy)} row(s) vary more than 10% between trials; rerun with more "
            f"{option_name('trials')} or a longer {option_name('min_sample_ms')}, on a quieter machine"
        )
    if short:
        iters = option_name("iters")
        lines.append(
            f"# warning: {len(short)} row(s) have samples too short for the timer; use {iters} auto or more {iters}"
        )
    bound = [r for r in summary.rows if FLAG_CALL_BOUND in r.flags.split(";")]
    if bound:
        lines.append("# note: " + call_bound_note(len(bound), f"time them with {option_name('cuda_graph')}"))
    lines += [f"# warning: {warning}" for warning in no_bandwidth_warnings([r.flags for r in summary.rows])]
    lines += repeats.slowest_group_lines(summary.rows) + repeats.cycle_spread_lines(summary.rows)
    lines += repeats.late_lines(summary.rows)
    if summary.wrong_total:
        lines.append(f"# ERROR: {summary.wrong_total} wrong element(s); the data check failed")
    span = sample_span(summary.rows)
    if span is not None:
        shortest_ms, longest_ms, shortest = span
        lines.append(
            f"# samples lasted {shortest_ms:,.0f} to {longest_ms:,.0f} ms (iters x fastest trial's time); shortest: "
            f"{shortest.op} {format_size(shortest.size_bytes)} {placement_text(shortest.placement)}"
        )
    if summary.plot_path is not None:
        lines.append(f"# plot: {summary.plot_path}")
    if summary.run_dir is not None:
        lines.append(f"# {summary.status}: {len(summary.rows)} row(s) in {summary.run_dir}")
    return lines
