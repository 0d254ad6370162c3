"""`nccl-bench report`: re-render runs (ours or nccl-tests') as a table or another format, and plot them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from nccl_bench.cli import messages, verdict_files
from nccl_bench.cli.option_sets import ReportArgs
from nccl_bench.cli.params import command_of
from nccl_bench.errors import UserInputError
from nccl_bench.options import FORMAT, HTML, OUTPUT, PLOT, RUNS


def _refused(given: dict, exc) -> None:
    verdict_files.outputs_refused([given.get(option.key) for option in (OUTPUT, PLOT, HTML)], given.get(RUNS.key) or ())


@command_of(refused=_refused)
def report_command(args: ReportArgs) -> None:
    """Re-render runs (ours or nccl-tests') as a table or another format, and plot them."""
    with verdict_files.written_or_removed((args.output, args.plot, args.html_file), args.runs):
        _report(args)


def _report(args: ReportArgs) -> None:
    from nccl_bench.render import formats as render_formats
    from nccl_bench.render import live
    from nccl_bench.results import loader
    from nccl_bench.results.run_folder import never_finished
    from nccl_bench.results.whole_file import write_text_file

    fmt, log_op, log_ranks = args.fmt, args.op, args.ranks
    render_formats.check_format(fmt)
    plot_path = _checked_plot_path(args.plot)
    output_path = render_formats.check_output_file(args.output, OUTPUT.name)
    html_path = render_formats.check_output_file(args.html_file, HTML.name, suffix=".html")
    paths = args.runs
    messages.notes(filter(None, map(never_finished, paths)))
    doctors = _doctor_runs(paths, fmt, plot_path)
    chosen = render_formats.FORMATS[fmt]
    if not (plot_path or html_path or doctors):
        if chosen.stream is not None:
            _stream(paths, chosen, fmt, output_path, log_hints(log_op, log_ranks))
            return
        if chosen.two_pass is not None:
            _two_pass(paths, chosen.two_pass, fmt, output_path, log_hints(log_op, log_ranks))
            return
    measured = [path for path in paths if path not in doctors]
    loaded = loader.load_runs(measured, hints=log_hints(log_op, log_ranks)) if measured else []
    if output_path:
        from nccl_bench.render.doctor_text import recorded_text

        text = render_formats.render_runs(measured, loaded, fmt) if loaded else ""
        doctor_texts = [recorded_text(doctor, loader.run_label(path)) for path, doctor in doctors.items()]
        write_text_file(output_path, text + "".join(doctor_texts))
        messages.plain(f"wrote {fmt} to {output_path}")
    else:
        if loaded:
            live.print_runs(measured, loaded, fmt)
        for path, doctor in doctors.items():
            live.print_doctor_run(path, doctor)
    if plot_path:
        from nccl_bench.render import plots as plotting

        plotting.write_plot(loaded, plot_path)
        messages.plain(f"wrote plot to {plot_path}")
        from nccl_bench.render.rank_heatmap import write_rank_plot

        if (rank_path := write_rank_plot(measured, loaded, plot_path)) is not None:
            messages.plain(f"wrote every rank's time in the op and lateness to {rank_path}")
    if html_path:
        from nccl_bench.render import html as html_page

        rows_of = dict(zip(measured, loaded, strict=True))
        inputs = [rows_of.get(path) or (loader.run_label(path), []) for path in paths]
        page = html_page.html_report(html_page.pages_for(paths, inputs))
        write_text_file(html_path, page)
        messages.plain(f"wrote HTML report to {html_path} ({html_path.stat().st_size / 1024:,.0f} KiB)")


def _stream(paths: list[Path], chosen, fmt: str, output_path: Optional[Path], hints) -> None:
    """One document of every input's rows, written as they are read: memory does not grow with the inputs.

    Each input is opened (and refused if it has no rows) before anything is written; a file given
    with --output is written beside its name and renamed into place only when complete.
    """
    import functools
    import itertools

    from nccl_bench.render import live
    from nccl_bench.results import loader
    from nccl_bench.results.whole_file import write_text_file

    inputs = [loader.stream_rows(path, hints=hints) for path in paths]  # each opened, its first row read
    streamed = chosen.stream
    if chosen.repeat_columns:  # a first pass finds the repeat columns the rows fill
        from nccl_bench.render.tables import repeats_streamed

        repeats = repeats_streamed(itertools.chain.from_iterable(inputs))
        inputs = [loader.stream_rows(path, hints=hints) for path in paths]
        streamed = functools.partial(chosen.stream, repeats=repeats)
    pieces = streamed(itertools.chain.from_iterable(inputs))
    if output_path is None:
        live.write_stream(pieces)
        return
    write_text_file(output_path, pieces)
    messages.plain(f"wrote {fmt} to {output_path}")


def _two_pass(paths: list[Path], two_pass, fmt: str, output_path: Optional[Path], hints) -> None:
    """Each input's table from two passes over its rows (widths, then lines): memory holds one row."""
    import itertools

    from nccl_bench.render import live
    from nccl_bench.results import loader
    from nccl_bench.results.whole_file import write_text_file

    readers = [_reader(path, hints) for path in paths]
    labels = loader.run_labels(paths)

    def lines(width):
        runs = zip(readers, labels, strict=True)
        return itertools.chain.from_iterable(two_pass(read, width, label) for read, label in runs)

    if output_path is None:
        live.print_lines_at_width(lines)
        return
    write_text_file(output_path, (line.plain + "\n" for line in lines(None)))
    messages.plain(f"wrote {fmt} to {output_path}")


def _reader(path: Path, hints):
    """`read()` giving the input's rows again on each call; an input without rows is refused now, before
    any output, and the second pass repeats no warning of the first."""
    import warnings

    from nccl_bench.results import loader

    loader.stream_rows(path, hints=hints)
    passes = []

    def again():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield from loader.stream_rows(path, hints=hints)

    def read():
        passes.append(path)
        return loader.stream_rows(path, hints=hints) if len(passes) == 1 else again()

    return read


def _doctor_runs(paths: list[Path], fmt: str, plot_path: Optional[Path]) -> dict:
    """The inputs that are a doctor's run folders (doctor.json, no results.csv) and their doctor.json.

    They have no result rows: the table format (and --html) show their verdict and nodes, the formats
    of result rows and --plot are refused for them.
    """
    from nccl_bench.render.html import doctor_only

    doctors = {path: doctor for path in paths if (doctor := doctor_only(path)) is not None}
    for path in doctors:
        if fmt != "table":  # FORMAT's default, the one format that shows a doctor run
            raise UserInputError(FORMAT.name, f"{path} is a doctor run (doctor.json, no result rows); "
                                 f"only the table format and {HTML.name} show it")
        if plot_path is not None:
            raise UserInputError(PLOT.name, f"{path} is a doctor run (doctor.json, no result rows); nothing to plot")
    return doctors


def _checked_plot_path(plot: Optional[Path]) -> Optional[Path]:
    """The plot's file: a writable .png/.svg/.pdf, and matplotlib present, before any work."""
    if not plot:
        return None
    from nccl_bench.render import plots as plotting
    from nccl_bench.render.formats import check_output_file

    path = check_output_file(plot, PLOT.name)
    if path.suffix.lower() not in plotting.PLOT_SUFFIXES:
        raise UserInputError(PLOT.name, f"{path} should end in {', '.join(plotting.PLOT_SUFFIXES)}")
    if not plotting.have_matplotlib():
        raise UserInputError(PLOT.name, plotting.MATPLOTLIB_MISSING)
    return path


def log_hints(op: Optional[str], ranks: Optional[int]):
    """The log hints of report and compare (--op, --ranks), as their fields read them."""
    from nccl_bench.results.loader import LogHints

    return LogHints(op, ranks)
