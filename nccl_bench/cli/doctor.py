"""`nccl-bench doctor`: options -> DoctorConfig -> the ranks (a launcher's, or local workers) -> exit 1 on a suspect."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from nccl_bench.cli import history as results_store
from nccl_bench.cli import local_workers, messages, streams
from nccl_bench.cli.params import param, read_given, values_of
from nccl_bench.errors import EXIT_VERDICT, RunFailedError
from nccl_bench.options import DOCTOR_OPTION as _OPTION
from nccl_bench.options import DOCTOR_OPTIONS, HISTORY, JSON_FILE, NO_HISTORY, WORKERS


def doctor_command(
    phases: Optional[list[str]] = param(_OPTION["phases"]),
    quick: bool = param(_OPTION["quick"], given_default=True),
    quick_rounds: Optional[int] = param(_OPTION["quick_rounds"]),
    seed: Optional[int] = param(_OPTION["seed"]),
    size_bytes: Optional[str] = param(_OPTION["size_bytes"]),
    iters: Optional[int] = param(_OPTION["iters"]),
    samples: Optional[int] = param(_OPTION["samples"]),
    warmup: Optional[int] = param(_OPTION["warmup"]),
    tolerance: str = param(_OPTION["tolerance"], given_default=True),
    expect_gbps: Optional[float] = param(_OPTION["expect_gbps"]),
    expect_hosts: Optional[str] = param(_OPTION["expect_hosts"]),
    exclude_file: Optional[Path] = param(_OPTION["exclude_file"]),
    backend: Optional[str] = param(_OPTION["backend"]),
    out: Optional[Path] = param(_OPTION["out"], folder="doctor"),
    results_root: Optional[Path] = param(_OPTION["results_root"]),
    timeout_s: Optional[float] = param(_OPTION["timeout_s"], step="exchange"),
    prom: Optional[Path] = param(_OPTION["prom"]),
    workers: Optional[int] = param(WORKERS),
    json_file: Optional[str] = param(JSON_FILE, what="the verdicts (doctor.json's schema)"),
    history: Optional[str] = param(HISTORY),
    no_history: bool = param(NO_HISTORY, given_default=True),
) -> None:
    """Find the slow node, rail or link: every node's all_reduce and every node pair in one launch; exit 1 on a suspect."""  # noqa: E501
    values = values_of(DOCTOR_OPTIONS, locals())  # the parameters are named after DoctorConfig's fields
    streams.stdout_is_a_view()  # its files (doctor.csv, doctor.json) are the product
    from nccl_bench.cli import rank_side

    rank_side.check_process_limits()  # before torch loads: too few files or too little memory to start
    read_given(WORKERS, workers)
    from nccl_bench.cli import rank_side
    from nccl_bench.doctor.doctor_config import build_config
    from nccl_bench.render.formats import check_output_file

    config = build_config(**values)
    json_path = check_output_file(read_given(JSON_FILE, json_file), JSON_FILE.name)
    check_output_file(config.exclude_file, _OPTION["exclude_file"].name)  # written by rank 0 with doctor.json
    check_output_file(config.prom, _OPTION["prom"].name)
    store = results_store.recording_target(history, no_history, config.results_root)
    launch = rank_side.detect_launch()
    if launch is None:
        _with_local_workers(config, workers, store)
        return
    from nccl_bench.render import live

    try:
        report = rank_side.doctor_body.execute(
            config, lambda rank: live.DoctorReporter() if rank == 0 else rank_side.doctor_report.SilentObserver(),
            on_stuck=messages.end_stuck_rank,
        )
    except rank_side.Interrupted as exc:
        local_workers.end_interrupted(launch, f"interrupted by {exc}; measurements so far are kept")
    if json_path is not None and launch.rank == 0:
        rank_side.doctor_report.write_report_json(report, json_path)
    if config.prom is not None and launch.rank == 0 and report.judgement is not None:
        from nccl_bench.render.prom import doctor_metrics

        verdicts = rank_side.doctor_report.report_json(report)
        live.write_prom(config.prom, report.run_dir, lambda meta, now: doctor_metrics(verdicts, meta, now))
    if report.judgement is not None and local_workers.speaks_for_run(launch):  # a verdict to keep
        results_store.record_run(report.run_dir, store)
    if report.judgement is not None and report.judgement.suspects:
        raise SystemExit(EXIT_VERDICT)  # every rank: the verdict was reached from the same gathered numbers


def _with_local_workers(config, workers: Optional[int], store) -> None:
    """No launcher: refuse a bad backend or host memory first; the workers' verdict decides the exit."""
    from nccl_bench.cli import rank_side
    from nccl_bench.results.run_folder import DOCTOR_JSON, new_run_dir

    def refuse_early(count: int) -> tuple[str, list[str]]:
        return rank_side.doctor_body.preflight(config, count), []

    default_target = new_run_dir(config.results_root, ["doctor"])
    try:
        run_dir = local_workers.start("doctor", workers, refuse_early, sys.argv[1:], config.out, default_target)
    except RunFailedError as exc:
        run_dir = getattr(exc, "run_dir", None)  # the folder it claimed, if it got that far
        if run_dir is None or not _suspects(run_dir / DOCTOR_JSON):
            raise
        results_store.record_run(run_dir, store)
        raise SystemExit(EXIT_VERDICT) from None  # the workers reported their suspects; exit 1 says so
    results_store.record_run(run_dir, store)
    if _suspects(run_dir / DOCTOR_JSON):  # complete, though a rank ended oddly after the verdict
        raise SystemExit(EXIT_VERDICT)


def _suspects(verdict_file: Path) -> bool:
    import json

    return verdict_file.is_file() and json.loads(verdict_file.read_text())["verdict"] == "suspects"
