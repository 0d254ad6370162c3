"""`nccl-bench sweep`: options -> the job (config and baseline check, validated) -> the ranks (a launcher's,
or local workers) -> the verdicts (--min-busbw, --baseline) -> outputs (--prom, the history, the baseline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from nccl_bench.cli import messages, on_ranks, verdict_files
from nccl_bench.cli.on_ranks import OnRanks, Ran
from nccl_bench.cli.option_sets import Recording, ReportArgs, SweepPlot, Workers
from nccl_bench.cli.params import command_of
from nccl_bench.cli.verdict_files import MetricsFile, metrics_of_this_run, metrics_so_far
from nccl_bench.errors import EXIT_VERDICT
from nccl_bench.option_types import declared
from nccl_bench.option_types import option_name as option_name_of
from nccl_bench.options import PROM
from nccl_bench.sweep.sweep_config import BaselineOptions, SweepConfig, option_name

if TYPE_CHECKING:
    from nccl_bench.sweep.sweep_entry import SweepJob


def _refused(given: dict, exc) -> None:
    verdict_files.metrics_refused(given.get(PROM.key), "sweep", option_name(PROM.key), exc)


@command_of(refused=_refused)
def sweep_command(config: SweepConfig, local: Workers, baseline: BaselineOptions, recording: Recording,
                  figure: SweepPlot) -> None:
    """Sweep message sizes for one or more collectives; print an nccl-tests-style table, write CSV + meta.json."""
    on_ranks.ready_for_ranks()
    from nccl_bench.render.formats import check_output_file  # what a run needs loads with it, never for --help
    from nccl_bench.results.run_folder import new_run_dir
    from nccl_bench.sweep.sweep_entry import plan_sweep

    check_output_file(config.prom, option_name("prom"))
    metrics = MetricsFile(config.prom, "sweep", option_name("prom"))
    with metrics_of_this_run(metrics, on_ranks.writes_run_outputs()):
        job = plan_sweep(config, baseline)
        store = on_ranks.recording_target_of(recording, config.results_root)
        ran = on_ranks.run_on_ranks(OnRanks(
            "sweep", job.preflight, lambda launch: _on_this_rank(job, metrics, launch, not figure.no_plot), config.out,
            new_run_dir(config.results_root, config.ops), "results measured so far are kept", job.variants,
            kept_away=tuple(carried.item for carried in declared(BaselineOptions).values()),
            verdict_on_disk=job.verdict_on_disk), local.workers)
    if ran.run_dir is None:  # a rank that does not speak for the run
        return
    if ran.verdict:  # wrong data, which the workers' rank 0 said
        raise SystemExit(ran.verdict)
    if job.config.nccl_env:  # the tuning answer, over every variant's rows
        _say_fastest_variant(ran.run_dir)
    on_ranks.record_in_history(ran.run_dir, store)
    _after_sweep(job, ran.run_dir)


def _on_this_rank(job: SweepJob, metrics: MetricsFile, launch, draw: bool) -> Ran:
    """Under a launcher: plan, check the plan against the baseline, measure; rank 0 has the run folder,
    and writes --prom whole, or with the rows measured before a failure or an interrupt."""
    from nccl_bench.render.live import LiveReporter, write_prom
    from nccl_bench.render.prom import sweep_metrics
    from nccl_bench.sweep.sweep_report import SilentObserver

    plan = job.plan_on_ranks(launch)
    if on_ranks.speaks_for_run(launch):  # local workers: the process that started them said it
        messages.notes(plan.before_start)
    reporter = LiveReporter(option_name_of(ReportArgs, "plot"), draw=draw)
    slurm_job = os.environ.get("SLURM_JOB_ID")
    try:
        summary = job.run(plan, lambda rank: reporter if rank == 0 else SilentObserver(), messages.end_stuck_rank)
    except BaseException as exc:
        if metrics.path is not None and launch.rank == 0:
            metrics_so_far(metrics, reporter.run_dir,
                           lambda meta, now: sweep_metrics(reporter.rows, meta, now, slurm_job), exc)
        raise
    if metrics.path is not None and summary.run_dir is not None:
        write_prom(metrics.path, summary.run_dir, lambda meta, now: sweep_metrics(summary.rows, meta, now, slurm_job),
                   metrics.option)
    if summary.wrong_total and on_ranks.carries_verdict(launch):
        messages.fail(f"{summary.wrong_total} wrong element(s) in the data check", EXIT_VERDICT)
    return Ran(summary.run_dir)


def _after_sweep(job: SweepJob, run_dir: Path) -> None:
    """The verdicts said (--min-busbw, then --baseline), the baseline saved if it passed; exit 1 if not."""
    verdicts = job.judge(run_dir)
    if verdicts.floor is not None:
        messages.notes(verdicts.floor.notes())
        (messages.error if verdicts.floor.exit_code else messages.say)(verdicts.floor.verdict())
    if verdicts.comparison is not None:
        from nccl_bench.render.live import report_comparison

        report_comparison(verdicts.comparison, {}, os.environ)
    if job.baseline is not None and job.baseline.save_name is not None:
        _save_baseline(job, run_dir, verdicts.why_not_saved())
    if verdicts.exit_code:
        raise SystemExit(verdicts.exit_code)


def _say_fastest_variant(run_dir: Path) -> None:
    from nccl_bench.render.live import print_lines_at_width
    from nccl_bench.render.repeats import fastest_variant_lines
    from nccl_bench.results.loader import read_run

    rows = read_run(run_dir, "run").rows
    print_lines_at_width(lambda width: fastest_variant_lines(rows))


def _save_baseline(job: SweepJob, run_dir: Path, why_not: str | None) -> None:
    """--save-baseline: only a run that passed its checks becomes the known-good reference."""
    name = job.baseline.save_name
    if why_not is not None:
        messages.say(f"not saving baseline {name!r}: {why_not}")
    else:
        messages.say(f"saved baseline {name!r} to {job.keep_baseline(run_dir)}")

