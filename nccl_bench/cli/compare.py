"""`nccl-bench compare`: a run against a baseline per op and size; its report
(render/live.report_comparison) is shared with `sweep --baseline`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from nccl_bench.cli import messages, streams
from nccl_bench.cli.params import read_given, read_or_default, takes, use
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


@takes(BASELINE_RUN, CURRENT_RUN, TOLERANCE, LATENCY_BELOW, ALLOW_MISMATCH, MARKDOWN, JUNIT, JSON_FILE, LOG_OP,
       LOG_RANKS, tolerance=use(given_default=True), min_bytes=use(given_default=True),
       allow_mismatch=use(given_default=True), json_file=use(what="the comparison as JSON"))
def compare_command(**given: Any) -> None:
    """Compare a run against a baseline per op and size; exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench import comparison
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.render.live import report_comparison
    from nccl_bench.results.loader import read_run
    from nccl_bench.results.run_folder import never_finished

    tolerance_fraction = read_or_default(TOLERANCE, given[TOLERANCE.key])
    min_size = read_or_default(LATENCY_BELOW, given[LATENCY_BELOW.key])
    outputs = {
        key: check_output_file(read_given(option, given[option.key]), option.name)
        for key, option in (("markdown", MARKDOWN), ("junit", JUNIT), ("json_path", JSON_FILE))
    }
    if any(outputs.values()):
        streams.stdout_is_a_view()  # the exports are the product; the table only shows them
    hints = log_hints(given[LOG_OP.key], given[LOG_RANKS.key])
    baseline, current = Path(given[BASELINE_RUN.key]), Path(given[CURRENT_RUN.key])
    messages.notes(filter(None, map(never_finished, dict.fromkeys((baseline, current)))))
    result = comparison.compare_runs(
        read_run(baseline, BASELINE_RUN.name, hints), read_run(current, CURRENT_RUN.name, hints),
        tolerance=tolerance_fraction, min_bytes=min_size, allow_mismatch=given[ALLOW_MISMATCH.key],
    )
    report_comparison(result, outputs, os.environ)
    raise typer.Exit(result.exit_code)

