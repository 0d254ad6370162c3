"""`nccl-bench compare`: a run against a baseline per op and size; the comparison's report, shared with
`sweep --baseline`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from nccl_bench.cli import messages, streams
from nccl_bench.cli.params import argument, param, read_given, read_or_default
from nccl_bench.cli.report import log_hints
from nccl_bench.options import (
    ALLOW_MISMATCH,
    BASELINE_RUN,
    CURRENT_RUN,
    JSON_FILE,
    JUNIT,
    LATENCY_BELOW,
    LOG_OP,
    LOG_RANKS,
    MARKDOWN,
    TOLERANCE,
)


def compare_command(
    baseline: str = argument(BASELINE_RUN),
    current: str = argument(CURRENT_RUN),
    tolerance: str = param(TOLERANCE, given_default=True),
    min_bytes: str = param(LATENCY_BELOW, given_default=True),
    allow_mismatch: bool = param(ALLOW_MISMATCH, given_default=True),
    markdown: str = param(MARKDOWN),
    junit: str = param(JUNIT),
    json_file: str = param(JSON_FILE, what="the comparison as JSON"),
    log_op: str = param(LOG_OP),
    log_ranks: int = param(LOG_RANKS),
) -> None:
    """Compare a run against a baseline per op and size; exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench import comparison
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.results.loader import read_run
    from nccl_bench.results.run_folder import never_finished

    tolerance_fraction = read_or_default(TOLERANCE, tolerance)
    min_size = read_or_default(LATENCY_BELOW, min_bytes)
    outputs = {
        key: check_output_file(read_given(option, value), option.name)
        for key, option, value in (("markdown", MARKDOWN, markdown), ("junit", JUNIT, junit),
                                   ("json_path", JSON_FILE, json_file))
    }
    if any(outputs.values()):
        streams.stdout_is_a_view()  # the exports are the product; the table only shows them
    hints = log_hints(log_op, log_ranks)
    messages.notes(filter(None, map(never_finished, dict.fromkeys((Path(baseline), Path(current))))))
    result = comparison.compare_runs(
        read_run(Path(baseline), BASELINE_RUN.name, hints), read_run(Path(current), CURRENT_RUN.name, hints),
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
