"""`nccl-bench compare`: a run against a baseline per op and size; its report
(render/live.report_comparison) is shared with `sweep --baseline`."""

from __future__ import annotations

import os

import typer

from nccl_bench.cli import messages, streams
from nccl_bench.cli.option_sets import CompareArgs
from nccl_bench.cli.params import command_of
from nccl_bench.cli.report import log_hints
from nccl_bench.cli.verdict_files import VerdictFiles, judged_or_said, verdict_refused
from nccl_bench.options import BASELINE_RUN, CURRENT_RUN, JSON_FILE, JUNIT, MARKDOWN


def _refused(given: dict, exc) -> None:
    from nccl_bench.render.compare_exports import JUNIT_SUITE_NAME

    verdict_refused(VerdictFiles(JUNIT_SUITE_NAME, *(given.get(option.key) for option in (JUNIT, MARKDOWN, JSON_FILE))),
                    exc)


@command_of(refused=_refused)
def compare_command(args: CompareArgs) -> None:
    """Compare a run against a baseline per op and size; exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench import comparison
    from nccl_bench.render.compare_exports import JUNIT_SUITE_NAME
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.render.live import report_comparison
    from nccl_bench.results.loader import read_run
    from nccl_bench.results.run_folder import never_finished

    outputs = {
        key: check_output_file(path, option.name)
        for key, path, option in (("markdown", args.markdown, MARKDOWN), ("junit", args.junit, JUNIT),
                                  ("json_path", args.json_file, JSON_FILE))
    }
    if any(outputs.values()):
        streams.stdout_is_a_view()  # the exports are the product; the table only shows them
    hints = log_hints(args.op, args.ranks)
    baseline, current = args.baseline, args.current
    messages.notes(filter(None, map(never_finished, dict.fromkeys((baseline, current)))))
    with judged_or_said(VerdictFiles(JUNIT_SUITE_NAME, outputs["junit"], outputs["markdown"], outputs["json_path"])):
        result = comparison.compare_runs(
            read_run(baseline, BASELINE_RUN.name, hints), read_run(current, CURRENT_RUN.name, hints),
            tolerance=args.tolerance, min_bytes=args.min_bytes, allow_mismatch=args.allow_mismatch,
        )
        report_comparison(result, outputs, os.environ)
    raise typer.Exit(result.exit_code)

