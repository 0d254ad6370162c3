"""`nccl-bench report`: re-render runs (ours or nccl-tests') as a table or another format, and plot them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from nccl_bench.cli.params import param, read_given
from nccl_bench.errors import UserInputError
from nccl_bench.options import LOG_OP, LOG_RANKS


def report_command(
    runs: list[str] = typer.Argument(
        ..., help="Run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.", metavar="RUN..."
    ),
    plot: str = typer.Option(
        None, "--plot", metavar="FILE",
        help="Also draw busbw and small-message latency against size into FILE (.png, .svg or .pdf).",
    ),
    fmt: str = typer.Option("table", "--format", help="table, markdown, csv, json or nccl-tests."),
    output: str = typer.Option(None, "--output", help="Write the rendering to FILE instead of stdout.", metavar="FILE"),
    log_op: str = param(LOG_OP),
    log_ranks: int = param(LOG_RANKS),
    html_file: str = typer.Option(
        None, "--html", help="Also write one self-contained HTML page (tables, plots, compare verdict of two runs).",
        metavar="FILE.html",
    ),
) -> None:
    """Re-render runs (ours or nccl-tests') as a table or another format, and plot them."""
    from nccl_bench.render import formats as render_formats
    from nccl_bench.render import live
    from nccl_bench.results import loader
    from nccl_bench.results.store import write_text_file

    render_formats.check_format(fmt)
    plot_path = _checked_plot_path(plot)
    output_path = render_formats.check_output_file(output and Path(output), "--output")
    html_path = render_formats.check_output_file(html_file and Path(html_file), "--html", suffix=".html")
    loaded = loader.load_runs([Path(run) for run in runs], hints=log_hints(log_op, log_ranks))
    paths = [Path(run) for run in runs]
    if output_path:
        write_text_file(output_path, render_formats.render_runs(paths, loaded, fmt))
        typer.echo(f"wrote {fmt} to {output_path}", err=True)
    else:
        live.print_runs(paths, loaded, fmt)
    if plot_path:
        from nccl_bench.render import plots as plotting

        plotting.write_plot(loaded, plot_path)
        typer.echo(f"wrote plot to {plot_path}", err=True)
    if html_path:
        from nccl_bench.render import html as html_page

        page = html_page.html_report(html_page.pages_for([Path(run) for run in runs], loaded))
        write_text_file(html_path, page)
        typer.echo(f"wrote HTML report to {html_path} ({html_path.stat().st_size / 1024:,.0f} KiB)", err=True)


def _checked_plot_path(plot: Optional[str]) -> Optional[Path]:
    """--plot: a writable .png/.svg/.pdf, and matplotlib present, before any work."""
    if not plot:
        return None
    from nccl_bench.render import plots as plotting
    from nccl_bench.render.formats import check_output_file

    path = check_output_file(Path(plot), "--plot")
    if path.suffix.lower() not in plotting.PLOT_SUFFIXES:
        raise UserInputError("--plot", f"{path} should end in {', '.join(plotting.PLOT_SUFFIXES)}")
    if not plotting.have_matplotlib():
        raise UserInputError("--plot", plotting.MATPLOTLIB_MISSING)
    return path


def log_hints(op: Optional[str], ranks: Optional[int]):
    """--op/--ranks of report and compare, checked: one known collective, at least 1 rank."""
    from nccl_bench.results.loader import LogHints

    return LogHints(read_given(LOG_OP, op), read_given(LOG_RANKS, ranks))
