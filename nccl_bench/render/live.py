"""Everything render/ puts on the terminal or, during a run, into its folder: the console, printing
lines, rank 0's live reporters for the sweep and the doctor, the plots a run leaves behind
(busbw.png, pairs.png), and the metrics file of --prom. The other render modules return text,
renderables and figures (`report --plot` and compare's files go from plots.py and compare_exports.py
straight to results' writers); no render module opens a file itself.

The rank code receives a reporter as an observer (through a factory the CLI hands it), so it never
imports this module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from rich.console import Console
from rich.text import Text

from nccl_bench.errors import RunFailedError, first_line
from nccl_bench.render import formats, repeats, tables
from nccl_bench.render.escape import terminal_text
from nccl_bench.render.fit import Layout
from nccl_bench.results.schema import ResultRow

if TYPE_CHECKING:  # the doctor's modules load with its reporter only: `ops` or `report` need none of them
    from nccl_bench.comparison import Comparison
    from nccl_bench.doctor.doctor_report import DoctorHeader, DoctorReport
    from nccl_bench.doctor.verdicts import Judgement

SWEEP_PLOT = "busbw.png"
HEATMAP_PNG = "pairs.png"


def write_prom(path: Path, run_dir: Path | None, metrics: Callable[[dict, float], str], option: str) -> None:
    """The metrics file of a finished run, written by rank 0 and replaced whole by a rename: `metrics`
    renders it from the run's final meta.json and the time now. A file that cannot be written fails
    the command (exit 3), naming `option` (the flag that asked for the file), and says that the results
    on disk are kept."""
    import time

    from nccl_bench.results.run_folder import read_meta
    from nccl_bench.results.whole_file import replace_whole

    meta = (read_meta(run_dir) if run_dir is not None else None) or {}
    try:
        replace_whole(path, metrics(meta, time.time()))
    except OSError as exc:
        problem = f"cannot write {path}: {exc.strerror} (the results on disk are kept)"
        raise RunFailedError(f"{option}: {problem}") from None


def make_console() -> Console:
    """A stdout console that never wraps lines: tables are fitted to its width (or unlimited when piped).
    stderr is cli/messages.py's."""
    return Console(soft_wrap=True)


def table_width(console: Console) -> int | None:
    """The width tables are fitted to: the terminal's, or None (no limit) under a pipe or in a file."""
    return console.width if console.is_terminal else None


def print_lines(console: Console, lines: Iterable[Text | str], style: str | None = None) -> None:
    """Each line printed as text: a control character in it is shown escaped, never sent to the terminal."""
    for line in lines:
        plain = line if isinstance(line, str) else line.plain
        if terminal_text(plain) != plain:
            line = Text(terminal_text(plain), style=line.style if isinstance(line, Text) else "")
        console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)


def print_runs(paths: Sequence[Path], loaded: Sequence[tuple[str, list[ResultRow]]], fmt: str,
               console: Console | None = None) -> None:
    """`report` on the terminal: a format with a terminal view is fitted to the width, run by run;
    the others print their text as it would be written to a file."""
    terminal = formats.FORMATS[formats.check_format(fmt)].terminal
    if terminal is None:
        sys.stdout.write(terminal_text(formats.render_runs(list(paths), list(loaded), fmt)))
        sys.stdout.flush()
        return
    console = console or make_console()
    for label, rows in loaded:
        print_lines(console, terminal(rows, table_width(console), label))


def report_comparison(result: Comparison, outputs: dict, environ) -> None:
    """A comparison's report (compare, sweep --baseline): the table, its notes, the failing rows and the
    summary on stdout; the files asked for in `outputs` written, and GitHub's step summary appended when
    the environment names one (a step summary that cannot be appended is a warning, not a failure)."""
    import warnings

    from nccl_bench.render import compare_exports

    console = make_console()
    print_lines(console, compare_exports.comparison_lines(result, table_width(console)))
    print_lines(console, (f"note: {note}" for note in result.notes))
    print_lines(console, compare_exports.failure_lines(result), style="red")
    print_lines(console, [result.summary()], style="bold red" if result.exit_code else "bold green")
    compare_exports.write_exports(result, **outputs)
    summary_file = compare_exports.step_summary_path(environ)
    if summary_file is not None:
        try:
            compare_exports.append_step_summary(result, summary_file)
        except OSError as exc:
            warnings.warn(f"cannot append to $GITHUB_STEP_SUMMARY ({summary_file}): {exc}", stacklevel=2)


def print_lines_at_width(lines: Callable[[int | None], Iterable[Text | str]]) -> None:
    """`lines(width)` printed as they come, at the terminal's width (None in a pipe)."""
    console = make_console()
    print_lines(console, lines(table_width(console)))


def write_stream(pieces: Iterable[str]) -> None:
    """Text written to stdout piece by piece as it is made, control characters shown escaped."""
    for piece in pieces:
        sys.stdout.write(terminal_text(piece))
    sys.stdout.flush()


def print_doctor_run(path: Path, doctor: dict, console: Console | None = None) -> None:
    """`report` of a doctor's run folder: its recorded verdict, nodes and suspects."""
    from nccl_bench.render.doctor_text import recorded_lines
    from nccl_bench.results.loader import run_label

    console = console or make_console()
    print_lines(console, recorded_lines(doctor, run_label(path), table_width(console)))


def _progress(console: Console, what: str, total: int):
    """A transient progress bar, started; only on a terminal (a pipe or a log gets the lines alone)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, transient=True)
    task = progress.add_task(what, total=total)
    progress.start()
    return progress, task


class LiveReporter:
    """Rank 0's observer of a sweep: header, rows as they finish, a progress bar on a terminal, summary."""

    def __init__(self, plot_flag: str, console: Console | None = None, draw: bool = True):
        self.console = console or make_console()
        self.plot_flag = plot_flag  # report's flag that draws busbw.png later, which a note may suggest
        self.draw = draw  # busbw.png at the end (--no-plot: not)
        self._progress = None
        self._task = None
        self._layout: Layout | None = None
        self._repeats: tuple[str, ...] = ()
        self.run_dir: Path | None = None
        self.rows: list[ResultRow] = []  # every row so far: what a run that fails still reports (--prom)

    def started(self, header, total_points: int) -> None:
        self.run_dir = header.run.run_dir
        width = table_width(self.console)
        self._layout = tables.live_layout(header, width)
        self._repeats = header.repeats
        print_lines(self.console, tables.header_lines(header))
        if self._layout.left_out:
            print_lines(self.console, [tables.left_out_note(self._layout, width)])
        print_lines(self.console, self._layout.header_lines())
        if self.console.is_terminal:
            self._progress, self._task = _progress(self.console, "sweep", total_points)

    def cycle_started(self, cycle: int, cycles: int) -> None:
        print_lines(self.console, [repeats.cycle_line(cycle, cycles)])
        if self._progress is not None and cycle > 1:
            self._progress.reset(self._task)

    def row_done(self, row: ResultRow) -> None:
        self.rows.append(row)
        print_lines(self.console, self._layout.row_lines(tables.result_cells(row, self._repeats)))
        if self._progress is not None:
            self._progress.advance(self._task)

    def finished(self, summary) -> None:
        if self._progress is not None:
            self._progress.stop()
        plot_note = None
        if summary.run_dir is not None and self.draw:
            summary.plot_path, plot_note = _sweep_plot(summary, self.plot_flag)
        print_lines(self.console, tables.summary_lines(summary))
        if plot_note:
            print_lines(self.console, [f"# note: {plot_note}"])


def write_sweep_plot(rows: list[ResultRow], run_dir: Path, peak_gbps: float | None = None) -> Path | None:
    """run_dir/busbw.png, or None when matplotlib is not installed (a sweep never fails for a plot)."""
    from nccl_bench.render import plots

    if not plots.have_matplotlib():
        return None
    run_dir = Path(run_dir)
    return plots.write_plot([(run_dir.name, rows)], run_dir / SWEEP_PLOT, peak_gbps=peak_gbps, title=run_dir.name)


def _sweep_plot(summary, plot_flag: str) -> tuple[Path | None, str | None]:
    """busbw.png beside the CSV where some op has a curve (two sizes or more), or why not (said once, at
    the end); a plot never fails a run.

    Not after a signal: a scheduler's grace before SIGKILL (Slurm's KillWait, 30 s by default) must
    go to the summary and a clean exit, and drawing took seconds on a loaded host; every rank's exit
    waits for rank 0's."""
    from nccl_bench.render.plots import draws_a_curve

    if not draws_a_curve(summary.rows):
        return None, None
    if summary.status == "interrupted":
        return None, (f"{SWEEP_PLOT} not drawn after the interruption; `nccl-bench report {summary.run_dir} "
                      f"{plot_flag} {SWEEP_PLOT}` draws it")
    try:
        from nccl_bench.render.plots import MATPLOTLIB_MISSING, have_matplotlib

        if not have_matplotlib():
            return None, f"{SWEEP_PLOT} not drawn: {MATPLOTLIB_MISSING}"
        return write_sweep_plot(summary.rows, summary.run_dir, peak_gbps=summary.peak_gbps), None
    except Exception as exc:  # a broken font cache or backend must not cost the measured rows
        return None, f"{SWEEP_PLOT} not written: {first_line(exc)}"


class DoctorReporter:
    """Rank 0's observer of the doctor: header, estimate, a progress bar over rounds on a terminal, the report."""

    def __init__(self, console: Console | None = None, draw: bool = True):
        from nccl_bench.render import doctor_text

        self.console = console or make_console()
        self._text = doctor_text
        self.draw = draw  # pairs.png with the report (--no-plot: not)
        self._progress = None
        self._task = None

    def _say(self, line: str, style: str | None = None) -> None:
        print_lines(self.console, [line], style)

    def started(self, header: DoctorHeader) -> None:
        print_lines(self.console, self._text.header_lines(header))

    def config_checked(self, summary: str, suspects: list[str]) -> None:
        self._say(summary)
        print_lines(self.console, suspects, style="bold red")

    def pairs_planned(self, rounds: int, per_round_s: float) -> None:
        self._say(self._text.estimate_line(rounds, per_round_s))
        if self.console.is_terminal:
            self._progress, self._task = _progress(self.console, "pair rounds", rounds)

    def rounds_added(self, rounds: int, what: list[str]) -> None:
        self._say(f"# re-test in {rounds} more round(s), nobody is named on one measurement: {', '.join(what)}")
        if self._progress is not None:
            total = self._progress.tasks[0].total or 0
            self._progress.update(self._task, total=total + rounds)

    def round_done(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def finished(self, report: DoctorReport) -> None:
        if self._progress is not None:
            self._progress.stop()
        judgement = report.judgement
        if judgement is not None:
            if report.run_dir is not None and self.draw:
                try:
                    report.heatmap_path = write_heatmap(judgement, report.run_dir)
                except Exception as exc:  # a broken font cache must not cost the verdict
                    report.notes.append(f"{HEATMAP_PNG} not written: {first_line(exc)}")
            config_only = report.header is not None and report.header.config_only
            if not config_only:
                self.console.print(self._text.node_table(judgement))
            print_lines(self.console, self._text.fleet_lines(judgement))
            print_lines(self.console, self._text.suspect_lines(judgement, repeat_config=not config_only),
                        style="bold red")
        for line in self._text.summary_lines(report):
            style = None
            if line.startswith("# verdict"):
                style = "bold red" if judgement and judgement.suspects else "bold green"
            self._say(line, style)


def write_heatmap(judgement: Judgement, run_dir: Path) -> Path | None:
    """run_dir/pairs.png, or None without matplotlib or without pairs."""
    if not judgement.pairs:
        return None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    from nccl_bench.render import plots
    from nccl_bench.render.doctor_text import heatmap_figure
    from nccl_bench.results.whole_file import write_text_file

    path = Path(run_dir) / HEATMAP_PNG
    figure = heatmap_figure(judgement, title=f"{Path(run_dir).name}: pair busbw (slowest rail)")
    write_text_file(path, plots.figure_bytes(figure, ".png", dpi=None))
    return path
