"""`nccl-bench compare`: a run against a baseline per op and size; its report
(render/live.report_comparison) is shared with `sweep --baseline`."""

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
    from nccl_bench.render.live import report_comparison
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

