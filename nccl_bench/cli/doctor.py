"""`nccl-bench doctor`: options -> DoctorConfig -> the ranks (a launcher's, or local workers) -> the verdict
(exit 1 on a suspect) -> outputs (doctor.json, --prom, the history)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from nccl_bench.cli import messages, on_ranks, verdict_files
from nccl_bench.cli.on_ranks import OnRanks, Ran
from nccl_bench.cli.option_sets import DoctorJson, DoctorPlot, Recording, Workers
from nccl_bench.cli.params import command_of
from nccl_bench.doctor.doctor_config import DoctorConfig, option_name
from nccl_bench.options import JSON_FILE, PROM

if TYPE_CHECKING:
    from nccl_bench.doctor.doctor_entry import DoctorJob


def _refused(given: dict, exc) -> None:
    verdict_files.metrics_refused(given.get(PROM.key), "doctor", option_name(PROM.key), exc)


@command_of(refused=_refused)
def doctor_command(config: DoctorConfig, local: Workers, verdicts: DoctorJson, recording: Recording,
                   figure: DoctorPlot) -> None:
    """Find the slow node, rail or link: every node's all_reduce and every node pair in one launch; exit 1 on a suspect."""  # noqa: E501
    on_ranks.ready_for_ranks()
    from nccl_bench.doctor.doctor_entry import DoctorJob  # what a run needs loads with it, never for --help
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.results.run_folder import new_run_dir

    job = DoctorJob(config)
    json_path = check_output_file(verdicts.json_file, JSON_FILE.name)
    check_output_file(config.exclude_file, option_name("exclude_file"))  # written by rank 0 with doctor.json
    check_output_file(config.prom, option_name("prom"))
    store = on_ranks.recording_target_of(recording, config.results_root)
    verdict_files.cleared(json_path, config.exclude_file)
    metrics = verdict_files.MetricsFile(config.prom, "doctor", option_name("prom"))
    with verdict_files.metrics_of_this_run(metrics, on_ranks.writes_run_outputs()):
        ran = on_ranks.run_on_ranks(OnRanks(
            "doctor", job.preflight, lambda launch: _on_this_rank(job, json_path, launch, not figure.no_plot),
            config.out, new_run_dir(config.results_root, ["doctor"]), "measurements so far are kept",
            verdict_on_disk=job.verdict_on_disk,
        ), local.workers)
    if ran.run_dir is not None:
        on_ranks.record_in_history(ran.run_dir, store)
    if ran.verdict:
        raise SystemExit(ran.verdict)  # the workers (or every rank here) reported their suspects


def _on_this_rank(job: DoctorJob, json_path: Optional[Path], launch, draw: bool) -> Ran:
    """Under a launcher: measure and judge; rank 0 writes doctor.json and --prom, and has the run folder
    when a verdict was reached."""
    from nccl_bench.doctor.doctor_report import SilentObserver, report_json, write_report_json
    from nccl_bench.render import live
    from nccl_bench.render.prom import doctor_metrics

    report = job.run(lambda rank: live.DoctorReporter(draw=draw) if rank == 0 else SilentObserver(),
                     messages.end_stuck_rank)
    config = job.config
    if json_path is not None and launch.rank == 0:
        write_report_json(report, json_path)
    if config.prom is not None and launch.rank == 0 and report.judgement is not None:
        verdicts = report_json(report)
        live.write_prom(config.prom, report.run_dir, lambda meta, now: doctor_metrics(verdicts, meta, now),
                        option_name("prom"))
    return Ran(report.run_dir if report.judgement is not None else None, job.verdict_of(report))
