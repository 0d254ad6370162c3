"""`nccl-bench sweep`: options -> SweepConfig -> the ranks (a launcher's, or local workers) -> the
comparison with a baseline, and the baseline saved."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from nccl_bench.cli import history as results_store
from nccl_bench.cli import local_workers, messages, streams
from nccl_bench.cli.params import param, read_given, values_of
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, UserInputError
from nccl_bench.options import (
    ALLOW_MISMATCH,
    BASELINE,
    HISTORY,
    NO_HISTORY,
    PRESET,
    REPLACE_BASELINE,
    SAVE_BASELINE,
    SWEEP_BASELINE_OPTIONS,
    SWEEP_OPTIONS,
    TOLERANCE,
    WORKERS,
)
from nccl_bench.options import SWEEP_OPTION as _OPTION


def sweep_command(
    ops: Optional[list[str]] = param(_OPTION["ops"]),
    min_bytes: Optional[str] = param(_OPTION["min_bytes"]),
    max_bytes: Optional[str] = param(_OPTION["max_bytes"]),
    step_factor: Optional[float] = param(_OPTION["step_factor"]),
    step_bytes: Optional[str] = param(_OPTION["step_bytes"]),
    sizes: Optional[str] = param(_OPTION["sizes"]),
    dtype: Optional[str] = param(_OPTION["dtype"]),
    reduce_op: Optional[str] = param(_OPTION["reduce_op"]),
    root: Optional[int] = param(_OPTION["root"]),
    alltoallv: Optional[str] = param(_OPTION["alltoallv"]),
    warmup: Optional[int] = param(_OPTION["warmup"]),
    iters: Optional[str] = param(_OPTION["iters"]),
    min_sample_ms: Optional[float] = param(_OPTION["min_sample_ms"]),
    trials: Optional[int] = param(_OPTION["trials"]),
    agg: Optional[str] = param(_OPTION["agg"]),
    inplace: Optional[bool] = param(_OPTION["inplace"]),
    check: Optional[bool] = param(_OPTION["check"]),
    split: Optional[str] = param(_OPTION["split"]),
    cycles: Optional[int] = param(_OPTION["cycles"]),
    nccl_env: Optional[list[str]] = param(_OPTION["nccl_env"]),
    nccl_trace: Optional[bool] = param(_OPTION["nccl_trace"]),
    backend: Optional[str] = param(_OPTION["backend"]),
    out: Optional[Path] = param(_OPTION["out"], folder="<ops>"),
    results_root: Optional[Path] = param(_OPTION["results_root"]),
    timeout_s: Optional[float] = param(_OPTION["timeout_s"], step="collective"),
    cuda_graph: Optional[int] = param(_OPTION["cuda_graph"]),
    blocking: Optional[bool] = param(_OPTION["blocking"]),
    peak_gbps: Optional[float] = param(_OPTION["peak_gbps"]),
    min_busbw_gbps: Optional[float] = param(_OPTION["min_busbw_gbps"]),
    prom: Optional[Path] = param(_OPTION["prom"]),
    preset: Optional[Path] = param(PRESET),
    workers: Optional[int] = param(WORKERS),
    baseline: Optional[Path] = param(BASELINE),
    tolerance: Optional[str] = param(TOLERANCE, prefix=f"With {BASELINE.name}"),
    save_baseline: Optional[str] = param(SAVE_BASELINE),
    replace_baseline: bool = param(REPLACE_BASELINE, given_default=True),
    allow_mismatch: bool = param(ALLOW_MISMATCH, given_default=True, prefix=f"With {BASELINE.name}"),
    history: Optional[str] = param(HISTORY),
    no_history: bool = param(NO_HISTORY, given_default=True),
) -> None:
    """Sweep message sizes for one or more collectives; print an nccl-tests-style table, write CSV + meta.json."""
    flags = values_of(SWEEP_OPTIONS, locals())  # the parameters are named after SweepConfig's fields
    streams.stdout_is_a_view()  # its files (results.csv, meta.json) are the product
    from nccl_bench.cli import rank_side

    rank_side.check_process_limits()  # before torch loads: too few files or too little memory to start
    read_given(WORKERS, workers)
    from nccl_bench.sweep.sweep_config import build_config

    sweep_config = build_config(flags, preset)
    _refuse_repeats_with_baseline(sweep_config, baseline)
    store = results_store.recording_target(history, no_history, sweep_config.results_root)
    from nccl_bench.cli import rank_side
    from nccl_bench.render.formats import check_output_file

    check_output_file(sweep_config.prom, _OPTION["prom"].name)

    baseline_check = rank_side.baseline_check.plan_baseline_check(baseline, tolerance, save_baseline, allow_mismatch,
                                                                   replace_baseline)
    if baseline_check is not None:
        baseline_check = baseline_check.with_rows(rank_side.saved_baselines.prepare_baselines(
            baseline_check.baseline, save_baseline, sweep_config.results_root, replace_baseline))
    launch = rank_side.detect_launch()
    if launch is None:
        run_dir = _with_local_workers(sweep_config, workers, baseline_check)
    else:
        run_dir = _on_this_rank(sweep_config, launch, workers, baseline_check)
    if run_dir is not None:  # rank 0 only
        speaks = launch is None or local_workers.speaks_for_run(launch)
        if speaks:
            results_store.record_run(run_dir, store)
        _after_sweep(run_dir, sweep_config, baseline_check, speaks)


def _refuse_repeats_with_baseline(sweep_config, baseline: Optional[Path]) -> None:
    """A comparison matches one row per point; a run of several cycles, groups or variants has many."""
    from nccl_bench.units.nccl_env import variants

    repeats = [option.name for option, given in ((_OPTION["cycles"], sweep_config.cycles != 1),
                                                 (_OPTION["split"], sweep_config.split is not None),
                                                 (_OPTION["nccl_env"], len(variants(sweep_config.nccl_env)) > 1))
               if given]
    if baseline is not None and repeats:
        verb = "give" if len(repeats) > 1 else "gives"
        raise UserInputError(BASELINE.name, f"compares one row per point; {' and '.join(repeats)} {verb} several "
                             "(read the run's rows with nccl-bench report instead)")


def _on_this_rank(sweep_config, launch, workers: Optional[int], baseline_check) -> Optional[Path]:
    """Under a launcher: plan, check the plan against the baseline, measure; rank 0 returns the run folder."""
    if workers is not None:
        started = f"{launch.launcher} already started {launch.world_size} rank(s)"
        raise UserInputError(WORKERS.name, f"only applies without a launcher; {started}")
    _refuse_variants_under_launcher(sweep_config, launch)
    import torch

    from nccl_bench.cli import rank_side
    from nccl_bench.render import live

    plan = rank_side.plan.plan_run(sweep_config, launch.world_size, torch.__version__, launch.local_world_size)
    rank_side.baseline_check.check_plan_against_baseline(baseline_check, launch.world_size, plan.backend,
                                                  plan.keys(sweep_config))
    if local_workers.speaks_for_run(launch):  # local workers: the process that started them said it
        messages.notes(plan.before_start)
    try:
        summary = rank_side.sweep_body.execute(
            sweep_config, lambda rank: live.LiveReporter() if rank == 0 else rank_side.sweep_report.SilentObserver(),
            on_stuck=messages.end_stuck_rank, plan=plan,
        )
    except rank_side.Interrupted as exc:
        if not exc.began:
            local_workers.end_interrupted(launch, f"interrupted by {exc} before the sweep began; nothing was measured")
        local_workers.end_interrupted(launch, f"interrupted by {exc}; results measured so far are kept")
    if sweep_config.prom is not None and summary.run_dir is not None:
        from nccl_bench.render.prom import sweep_metrics

        live.write_prom(sweep_config.prom, summary.run_dir, lambda meta, now: sweep_metrics(summary.rows, meta, now))
    if summary.wrong_total:
        messages.fail(f"{summary.wrong_total} wrong element(s) in the data check", EXIT_VERDICT)
    return summary.run_dir


def _refuse_variants_under_launcher(sweep_config, launch) -> None:
    """Each --nccl-env variant needs fresh ranks; a launcher's ranks cannot be restarted from inside."""
    from nccl_bench.cli import rank_side
    from nccl_bench.units.nccl_env import shell_loop

    if not sweep_config.nccl_env or os.environ.get(rank_side.LOCAL_WORKER_ENV):
        return
    option = _OPTION["nccl_env"].name
    loop = shell_loop(sweep_config.nccl_env, f"{launch.launcher} ... nccl-bench sweep ... (without {option})")
    raise UserInputError(option, f"needs fresh ranks for each variant, and {launch.launcher} started these once; "
                         f"loop in the shell instead: {loop}")


def _with_local_workers(sweep_config, workers: Optional[int], baseline_check) -> Path:
    """No launcher: refuse a bad backend, root, plan, memory or baseline before any worker starts."""
    from nccl_bench.cli import rank_side
    from nccl_bench.results.run_folder import new_run_dir

    def refuse_early(count: int) -> tuple[str, list[str]]:
        plan = rank_side.plan.preflight(sweep_config, count, count)
        rank_side.baseline_check.check_plan_against_baseline(baseline_check, count, plan.backend,
                                                             plan.keys(sweep_config))
        return plan.backend, list(plan.before_start)

    default_target = new_run_dir(sweep_config.results_root, sweep_config.ops)
    args = worker_args(sys.argv[1:])
    from nccl_bench.units.nccl_env import variants

    envs = [dict(variant) for variant in variants(sweep_config.nccl_env)]
    run_dir = local_workers.start("sweep", workers, refuse_early, args, sweep_config.out, default_target, envs)
    if sweep_config.nccl_env:  # the tuning answer, over every variant's rows
        from nccl_bench.render import live, repeats

        rows = rank_side.read_run(run_dir, "run").rows
        live.print_lines_at_width(lambda width: repeats.fastest_variant_lines(rows))
    return run_dir


def worker_args(args: list[str]) -> list[str]:
    """The command line for local workers: without what only this process acts on (the baseline, --workers)."""
    kept_away = (*SWEEP_BASELINE_OPTIONS, WORKERS)
    with_value = tuple(option.name for option in kept_away if option.takes_value)
    switches = tuple(option.name for option in kept_away if not option.takes_value)
    joined = tuple(f"{name}=" for name in with_value)
    kept, skip_value = [], False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in with_value:
            skip_value = True
        elif arg not in switches and not arg.startswith(joined):
            kept.append(arg)
    return kept


def _after_sweep(run_dir: Path, sweep_config, baseline_check, speaks: bool) -> None:
    """The floor of --min-busbw (said by the process that speaks for the run), then --baseline /
    --save-baseline: compare the finished run, then store it if it passed both."""
    from nccl_bench.cli import rank_side

    exit_code = EXIT_OK
    if speaks and sweep_config.min_busbw_gbps is not None:
        exit_code = _floor_verdict(rank_side.read_run(run_dir, "run").rows, sweep_config.min_busbw_gbps)
    if baseline_check is not None:
        exit_code = max(exit_code, _baseline_verdict(run_dir, sweep_config.results_root, baseline_check, exit_code))
    if exit_code:
        raise SystemExit(exit_code)


def _floor_verdict(rows, floor_gbps: float) -> int:
    """Each op's busbw at its largest measured size against --min-busbw: one line, EXIT_VERDICT below it."""
    from nccl_bench.cli import rank_side

    floor = rank_side.busbw_floor.check_floor(rows, floor_gbps)
    option = f"{_OPTION['min_busbw_gbps'].name} {floor_gbps:g} GB/s"
    messages.notes(f"{op}: no size measured, so not checked against {option}" for op in floor.unchecked_ops)
    if floor.below:
        below = "; ".join(rank_side.busbw_floor.floor_row_text(row) for row in floor.below)
        messages.error(f"below {option} at the op's largest measured size: {below}")
    elif floor.checked:
        lowest = min(floor.checked, key=lambda row: row.busbw_gbps)
        messages.say(f"{option} reached at each op's largest measured size (lowest: "
                     f"{rank_side.busbw_floor.floor_row_text(lowest)})")
    return floor.exit_code


def _baseline_verdict(run_dir: Path, results_root: Path, baseline_check, floor_exit: int) -> int:
    """The baseline options: compare the finished run with --baseline, then store it with
    --save-baseline if it passed."""
    from nccl_bench.cli import rank_side
    from nccl_bench.render.live import report_comparison

    exit_code = EXIT_OK
    if baseline_check.baseline is not None:
        result = rank_side.baseline_check.check_against_baseline(baseline_check, rank_side.read_run(run_dir, "run"))
        report_comparison(result, {}, os.environ)
        exit_code = result.exit_code
    if baseline_check.save_name is not None:
        if exit_code or floor_exit:
            why = "the run regressed" if exit_code else f"the run is below {_OPTION['min_busbw_gbps'].name}"
            messages.say(f"not saving baseline {baseline_check.save_name!r}: {why}")
        else:
            saved = rank_side.saved_baselines.save_baseline(
                run_dir, baseline_check.save_name, results_root, baseline_check.replace_baseline
            )
            messages.say(f"saved baseline {baseline_check.save_name!r} to {saved}")
    return exit_code
