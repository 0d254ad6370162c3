"""`nccl-bench compare`: a run against a baseline per op and size; the comparison's report, shared with
`sweep --baseline`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from nccl_bench.cli import messages
from nccl_bench.cli.params import param
from nccl_bench.cli.report import log_hints
from nccl_bench.options import LOG_OP, LOG_RANKS


def compare_command(
    baseline: str = typer.Argument(
        ..., help="Baseline: run folder, results.csv, nccl_bench JSON, nccl-tests log or -J JSON.", metavar="BASELINE"
    ),
    current: str = typer.Argument(..., help="Current run, in any of the same forms.", metavar="CURRENT"),
    tolerance: str = typer.Option("10%", "--tolerance", help="Allowed loss before a row regresses: 10% or 0.1."),
    min_bytes: str = typer.Option(
        "64K", "--min-bytes", help="Sizes below this are latency-bound: judged on time, not busbw."
    ),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Compare runs with a different world size or backend."
    ),
    markdown: str = typer.Option(None, "--markdown", help="Also write a Markdown report to FILE.", metavar="FILE"),
    junit: str = typer.Option(
        None, "--junit", help="Also write JUnit XML (one testcase per row) to FILE.", metavar="FILE"
    ),
    json_file: str = typer.Option(None, "--json", help="Also write the comparison as JSON to FILE.", metavar="FILE"),
    log_op: str = param(LOG_OP),
    log_ranks: int = param(LOG_RANKS),
) -> None:
    """Compare a run against a baseline per op and size; exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench import comparison
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.results.loader import read_run
    from nccl_bench.units.sizes import parse_size

    tolerance_fraction = comparison.parse_tolerance(tolerance, "--tolerance")
    min_size = parse_size(min_bytes, "--min-bytes")
    outputs = {
        "markdown": check_output_file(markdown and Path(markdown), "--markdown"),
        "junit": check_output_file(junit and Path(junit), "--junit"),
        "json_path": check_output_file(json_file and Path(json_file), "--json"),
    }
    hints = log_hints(log_op, log_ranks)
    result = comparison.compare_runs(
        read_run(Path(baseline), "BASELINE", hints), read_run(Path(current), "CURRENT", hints),
        tolerance=tolerance_fraction, min_bytes=min_size, allow_mismatch=allow_mismatch,
    )
    report_comparison(result, outputs, os.environ)
    raise typer.Exit(result.exit_code)


def report_comparison(result, outputs: dict, environ) -> None:
    """Print the table, the failing rows and the summary; write the requested files."""
    from nccl_bench.render import compare_exports
    from nccl_bench.render.live import make_console, print_lines, table_width

    console = make_console()
    print_lines(console, compare_exports.comparison_lines(result, table_width(console)))
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in compare_exports.failure_lines(result):
        console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)
    style = "bold red" if result.failures else "bold green"
    console.print(result.summary(), style=style, markup=False, highlight=False, soft_wrap=True)
    compare_exports.write_exports(result, **outputs)
    summary_file = compare_exports.step_summary_path(environ)
    if summary_file is not None:
        try:
            compare_exports.append_step_summary(result, summary_file)
        except OSError as exc:
            messages.say(f"warning: cannot append to $GITHUB_STEP_SUMMARY ({summary_file}): {exc}")
