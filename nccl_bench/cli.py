"""Typer command line: parse options, build a config, call the core, map errors to exit codes.

Option names are chosen so that `torchrun ... -m nccl_bench <command> <options>` passes every one
of them through untouched (torchrun rejects ambiguous prefixes of its own options, such as --no).
Heavy imports (torch, pandas, matplotlib) happen inside the commands, so --help answers at once.
"""

from __future__ import annotations

import sys

import typer

from nccl_bench.errors import RunFailedError, UserInputError

app = typer.Typer(
    name="nccl-bench",
    help="Measure collective-communication bandwidth through torch.distributed, as nccl-tests does.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int) -> None:
    typer.echo(f"nccl-bench: error: {message}", err=True)
    raise typer.Exit(code)


@app.command("ops")
def ops_command() -> None:
    """List every collective with its size meaning and bus-bandwidth factor."""
    from rich.console import Console

    from nccl_bench.report import ops_table

    Console().print(ops_table())


@app.command("compare")
def compare_command(
    baseline: str = typer.Argument(..., help="Baseline run folder or results.csv.", metavar="BASELINE"),
    current: str = typer.Argument(..., help="Current run folder or results.csv.", metavar="CURRENT"),
    tolerance: str = typer.Option("10%", "--tolerance", help="Allowed loss before a row regresses: 10% or 0.1."),
    min_bytes: str = typer.Option(
        "64K", "--min-bytes", help="Sizes below this are latency-bound: judged on time, not busbw."
    ),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Compare runs with a different world size or backend."
    ),
    markdown: str = typer.Option(None, "--markdown", help="Also write a Markdown report to FILE.", metavar="FILE"),
    junit: str = typer.Option(None, "--junit", help="Also write JUnit XML (one testcase per row) to FILE.", metavar="FILE"),
    json_file: str = typer.Option(None, "--json", help="Also write the comparison as JSON to FILE.", metavar="FILE"),
) -> None:
    """Compare a run against a baseline per op and size; exit 0 ok, 1 regression, 2 bad input."""
    import os
    from pathlib import Path

    from nccl_bench import compare, export_compare
    from nccl_bench.sizes import parse_size

    tolerance_fraction = compare.parse_tolerance(tolerance, "--tolerance")
    min_size = parse_size(min_bytes, "--min-bytes")
    outputs = {
        "markdown": export_compare.check_output_path(markdown and Path(markdown), "--markdown"),
        "junit": export_compare.check_output_path(junit and Path(junit), "--junit"),
        "json_path": export_compare.check_output_path(json_file and Path(json_file), "--json"),
    }
    result = compare.compare_paths(Path(baseline), Path(current), tolerance_fraction, min_size, allow_mismatch)
    _report_comparison(result, outputs, os.environ)
    raise typer.Exit(result.exit_code)


def _report_comparison(result, outputs: dict, environ) -> None:
    """Print the table, the failing rows and the summary; write the requested files (shared with sweep)."""
    from rich.console import Console

    from nccl_bench import export_compare

    console = Console()
    console.print(export_compare.comparison_table(result))
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in export_compare.failure_lines(result):
        console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)
    console.print(
        result.summary(), style="bold red" if result.failures else "bold green", markup=False, highlight=False, soft_wrap=True
    )
    export_compare.write_exports(result, **outputs)
    summary_file = export_compare.step_summary_path(environ)
    if summary_file is not None:
        try:
            export_compare.append_step_summary(result, summary_file)
        except OSError as exc:
            typer.echo(f"nccl-bench: warning: cannot append to $GITHUB_STEP_SUMMARY ({summary_file}): {exc}", err=True)


@app.command("report")
def report_command(
    runs: list[str] = typer.Argument(
        ..., help="Run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.", metavar="RUN..."
    ),
    plot: str = typer.Option(
        None, "--plot", help="Also draw busbw and small-message latency against size into FILE.png.", metavar="FILE.png"
    ),
    fmt: str = typer.Option("table", "--format", help="table, markdown, csv, json or nccl-tests."),
    output: str = typer.Option(None, "--output", help="Write the rendering to FILE instead of stdout.", metavar="FILE"),
) -> None:
    """Re-render runs (ours or nccl-tests') as a table or another format, and plot them."""
    from pathlib import Path

    from rich.console import Console

    from nccl_bench import formats
    from nccl_bench.report import make_console

    formats.check_format(fmt)
    plot_path = formats.check_output_file(plot and Path(plot), "--plot", suffix=".png")
    output_path = formats.check_output_file(output and Path(output), "--output")
    loaded = formats.load_runs([Path(run) for run in runs])
    status = Console(stderr=True)
    if fmt == "table":
        handle = open(output_path, "w", encoding="utf-8") if output_path else None
        try:
            console = Console(file=handle, width=200, color_system=None) if handle else make_console()
            for label, rows in loaded:
                console.print(formats.render(rows, fmt, title=label))
        finally:
            if handle:
                handle.close()
    else:
        text = formats.render([row for _, rows in loaded for row in rows], fmt)
        if output_path:
            output_path.write_text(text, encoding="utf-8")
        else:
            typer.echo(text, nl=False)
    if output_path:
        status.print(f"wrote {fmt} to {output_path}", markup=False, highlight=False)
    if plot_path:
        from nccl_bench import plot as plotting

        try:
            plotting.write_plot(loaded, plot_path)
        except ImportError:
            raise UserInputError("--plot", "matplotlib is not installed; pip install 'nccl-bench[plot]'") from None
        status.print(f"wrote plot to {plot_path}", markup=False, highlight=False)


def main() -> None:
    """Console-script entry: one line and a non-zero exit for every known failure, never a traceback."""
    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        exit_code = app(standalone_mode=False)
        if isinstance(exit_code, int) and exit_code:
            sys.exit(exit_code)
    except UserInputError as exc:
        _print_error(str(exc), exc.exit_code)
    except RunFailedError as exc:
        _print_error(str(exc), exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _print_error("interrupted", 130)
    except _click_usage_errors() as exc:
        _print_error(_click_message(exc), 2)


def _print_error(message: str, code: int) -> None:
    print(f"nccl-bench: error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def _click_usage_errors():
    import click

    return (click.exceptions.UsageError, click.exceptions.BadParameter, click.exceptions.ClickException)


def _click_message(exc) -> str:
    return exc.format_message() if hasattr(exc, "format_message") else str(exc)
