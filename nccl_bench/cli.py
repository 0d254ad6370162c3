"""Typer command line: parse options, build a config, call the core, map errors to exit codes.

Option names are chosen so that `torchrun ... -m nccl_bench <command> <options>` passes every one
of them through untouched (torchrun rejects ambiguous prefixes of its own options, such as --no).
Heavy imports (torch, pandas, matplotlib) happen inside the commands, so --help answers at once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from nccl_bench.errors import RunFailedError, UserInputError

app = typer.Typer(
    name="nccl-bench",
    help="Measure collective-communication bandwidth through torch.distributed, as nccl-tests does.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rendering it with rich imports typer.rich_utils (~0.12 s), which alone
    # would take `--help` past issue 3's 0.3 s budget (see benchmarks/startup.py).
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        import nccl_bench

        typer.echo(f"nccl-bench {nccl_bench.__version__}")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """Measure collective-communication bandwidth through torch.distributed, as nccl-tests does."""


def _fail(message: str, code: int) -> None:
    typer.echo(f"nccl-bench: error: {message}", err=True)
    raise typer.Exit(code)


@app.command("ops")
def ops_command() -> None:
    """List every collective with its size meaning and bus-bandwidth factor."""
    from nccl_bench.render.tables import make_console, ops_lines, print_lines, table_width

    console = make_console()
    print_lines(console, ops_lines(table_width(console)))


@app.command("sweep")
def sweep_command(
    op: Optional[list[str]] = typer.Option(None, "--op", help="Collective to run; repeat or comma-separate; 'all' for every one. See `nccl-bench ops`."),
    min_bytes: Optional[str] = typer.Option(None, "-b", "--min-bytes", help="Smallest size, e.g. 8, 1K, 1M (powers of 1024)."),
    max_bytes: Optional[str] = typer.Option(None, "-e", "--max-bytes", help="Largest size, e.g. 64M, 1G."),
    step_factor: Optional[float] = typer.Option(None, "-f", "--step-factor", help="Geometric step between sizes (default 2)."),
    step_bytes: Optional[str] = typer.Option(None, "-i", "--step-bytes", help="Linear step between sizes instead of -f."),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="Explicit sizes, e.g. 1K,1M,64M (instead of -b/-e)."),
    dtype: Optional[str] = typer.Option(None, "-d", "--dtype", help="float32 (default), float16, bfloat16, float64, int8, uint8, int32, int64."),
    reduce_op: Optional[str] = typer.Option(None, "-o", "--reduce-op", help="sum (default), prod, min, max, avg."),
    root: Optional[int] = typer.Option(None, "--root", help="Root rank of broadcast, reduce, gather, scatter (default 0)."),
    warmup: Optional[int] = typer.Option(None, "-w", "--warmup", help="Untimed ops before each point (default 5)."),
    iters: Optional[str] = typer.Option(None, "-n", "--iters", help="Timed ops per sample, or 'auto' (default): calibrated to --min-sample-ms."),
    min_sample_ms: Optional[float] = typer.Option(None, "--min-sample-ms", help="With --iters auto, the sample length each size is calibrated for (default 50 on GPU, 200 on CPU); the run ends by saying how long samples lasted."),
    trials: Optional[int] = typer.Option(None, "--trials", help="Samples per point; the row reports their median and range (default 1)."),
    agg: Optional[str] = typer.Option(None, "--agg", help="Combine ranks' times by max (default: the slowest rank defines a collective), avg or min."),
    inplace: Optional[bool] = typer.Option(None, "--inplace/--no-inplace", help="Only in-place or only out-of-place (default: both where torch has both)."),
    check: Optional[bool] = typer.Option(None, "--check/--no-check", help="Verify every output element after timing (default on)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="auto (default: nccl with CUDA, else gloo), nccl, gloo, mpi, ucc."),
    out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default results/<UTC time>_<ops>/); must not hold results already."),
    results_root: Optional[Path] = typer.Option(None, "--results-root", help="Parent of the default results folder (default ./results)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds before a stalled collective or rendezvous fails (default 300)."),
    cuda_graph: Optional[int] = typer.Option(None, "--cuda-graph", help="GPU only: capture this many ops in a CUDA graph and replay it (as nccl-tests -G)."),
    blocking: Optional[bool] = typer.Option(None, "--blocking", help="GPU only: synchronize after every op (per-op latency mode)."),
    peak: Optional[float] = typer.Option(None, "--peak", help="Reference peak bus bandwidth in GB/s for %peak (default: detected)."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML preset (see configs/); flags given here win."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Without a launcher: start this many local ranks (default: one per GPU, or 2 on CPU)."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="After the run, compare it with this run folder, results.csv or nccl-tests log/JSON (as `compare`); exit 1 on a regression.", metavar="PATH"),
    tolerance: Optional[str] = typer.Option(None, "--tolerance", help="With --baseline: allowed loss before a row regresses, 10% (default) or 0.1."),
    save_baseline: Optional[str] = typer.Option(None, "--save-baseline", help="Store the run as <results-root>/baselines/NAME/ (with --baseline: only if the check passes).", metavar="NAME"),
    replace_baseline: bool = typer.Option(False, "--replace-baseline", help="With --save-baseline: replace a baseline of that name (refused otherwise)."),
    allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="With --baseline: compare even when the world size or backend differs."),
) -> None:
    """Sweep message sizes for one or more collectives; print an nccl-tests-style table, write CSV + meta.json."""
    from nccl_bench.config import build_config

    flags = dict(
        ops=op or None, min_bytes=min_bytes, max_bytes=max_bytes, step_factor=step_factor, step_bytes=step_bytes,
        sizes=sizes, dtype=dtype, reduce_op=reduce_op, root=root, warmup=warmup, iters=iters,
        min_sample_ms=min_sample_ms, trials=trials, agg=agg, inplace=inplace, check=check, backend=backend,
        out=out, results_root=results_root, timeout_s=timeout, cuda_graph=cuda_graph, blocking=blocking,
        peak_gbps=peak,
    )
    if workers is not None and workers < 1:
        raise UserInputError("--workers", f"must be at least 1, got {workers}")
    sweep_config = build_config(flags, config)
    from nccl_bench.compare import check_plan_against_baseline, plan_baseline_check

    baseline_check = plan_baseline_check(
        baseline, tolerance, save_baseline, allow_mismatch, replace_baseline, sweep_config.results_root
    )

    from nccl_bench.ranks.dist import detect_launch

    launch = detect_launch()
    if launch is None:
        run_dir = _sweep_with_local_workers(sweep_config, workers, baseline_check)
        _after_sweep(run_dir, sweep_config.results_root, baseline_check)
        return
    if workers is not None:
        raise UserInputError("--workers", f"only applies without a launcher; {launch.launcher} already started {launch.world_size} rank(s)")
    from nccl_bench.ranks import sweep as sweep_module
    from nccl_bench.ranks.faults import Interrupted
    from nccl_bench.render.tables import LiveReporter

    import torch

    plan = sweep_module.plan_run(sweep_config, launch.world_size, torch.__version__)
    check_plan_against_baseline(baseline_check, launch.world_size, plan.backend, plan.keys(sweep_config))
    from nccl_bench.ranks.launch import LOCAL_WORKER_ENV

    if launch.rank == 0 and not os.environ.get(LOCAL_WORKER_ENV):  # local workers: the command said it
        _say_notes(plan.before_start)
    try:
        summary = sweep_module.execute(
            sweep_config, lambda rank: LiveReporter() if rank == 0 else sweep_module.SilentObserver(),
            on_stuck=_end_stuck_rank, plan=plan,
        )
    except Interrupted as exc:
        if launch.rank != 0 or os.environ.get(LOCAL_WORKER_ENV):  # rank 0, or the process that started us, says it once
            raise typer.Exit(130) from None
        if not exc.began:
            _fail(f"interrupted by {exc} before the sweep began; nothing was measured", 130)
        _fail(f"interrupted by {exc}; results measured so far are kept", 130)
    if summary.wrong_total:
        _fail(f"{summary.wrong_total} wrong element(s) in the data check", 1)
    if summary.run_dir is not None:  # rank 0 only
        _after_sweep(summary.run_dir, sweep_config.results_root, baseline_check)


def _end_stuck_rank(exc: RunFailedError) -> None:
    """A rank's deadline aborted its process group, or gave up on its main thread (stuck where no abort
    reaches): report, then end the process at once, without torch's teardown (it would join threads
    the abort left waiting); meta.json already says failed, and every finished row is on disk."""
    if not exc.quiet:
        print(f"nccl-bench: error: {exc}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(exc.exit_code)


def _say_notes(notes) -> None:
    for note in notes:
        typer.echo(f"nccl-bench: note: {note}", err=True)


def _sweep_with_local_workers(sweep_config, workers: Optional[int], baseline_check) -> Path:
    """No launcher: pick the run folder here (so a bad path fails now) and start local ranks."""
    from nccl_bench.compare import check_plan_against_baseline
    from nccl_bench.ranks.launch import check_workers, default_workers
    from nccl_bench.ranks.sweep import preflight
    from nccl_bench.results.store import new_run_dir

    why = None
    if workers is None:
        workers, why = default_workers()
    plan = preflight(sweep_config, workers, workers)  # bad backend, root, plan or memory: fail before any worker
    worker_notes = check_workers(workers, plan.backend)
    check_plan_against_baseline(baseline_check, workers, plan.backend, plan.keys(sweep_config))
    args = _without_baseline_options(sys.argv[1:])  # this process checks the baseline, not a worker
    default_target = new_run_dir(sweep_config.results_root, sweep_config.ops)
    return _start_local_workers("sweep", workers, why, args, sweep_config.out, default_target, [*plan.before_start, *worker_notes])


def _start_local_workers(what: str, workers: int, why: Optional[str], args: list[str], out: Optional[Path],
                         default_target: Path, notes) -> Path:
    """Make the run folder here (a bad path fails before any worker), start local ranks, and end a
    Ctrl-C/SIGTERM or a failure in one line; a folder nothing was written to is removed again."""
    from nccl_bench.ranks.faults import (
        Interrupted,
        hold_signals,
        signals_raise_interrupted,
    )
    from nccl_bench.ranks.launch import run_local_workers
    from nccl_bench.results.store import prepare_run_dir, read_meta, remove_if_empty

    target = out if out is not None else default_target
    made = None if target.exists() else target
    # From the folder on, a signal is an Interrupted here too (torch's agent installs its own while it runs).
    with signals_raise_interrupted():
        try:
            run_dir = prepare_run_dir(target, "--out" if out is not None else "--results-root")
            if out is None:
                args = [*args, "--out", str(run_dir)]
            if why is not None:
                typer.echo(f"nccl-bench: no launcher found; starting {why} (use --workers N to choose)", err=True)
            _say_notes(notes)
            run_local_workers(workers, args)
        except Interrupted as exc:
            hold_signals()  # a second Ctrl-C must not cut this report short
            meta = read_meta(target)
            if meta is None:
                remove_if_empty(made)
                _fail(f"interrupted by {exc} before the {what} began; nothing was measured", 130)
            kept = f"the {meta['rows']} row(s) measured so far are" if "rows" in meta else "what was measured so far is"
            _fail(f"interrupted by {exc}; {kept} kept in {target}", 130)
        except RunFailedError:
            remove_if_empty(made)
            raise
    return run_dir


def _without_baseline_options(args: list[str]) -> list[str]:
    """The command line for local workers: without what only this process acts on."""
    from nccl_bench.compare import SWEEP_BASELINE_FLAGS, SWEEP_BASELINE_OPTIONS

    with_value = (*SWEEP_BASELINE_OPTIONS, "--workers")
    kept, skip_value = [], False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in with_value:
            skip_value = True
        elif arg not in SWEEP_BASELINE_FLAGS and not arg.startswith(tuple(f"{name}=" for name in with_value)):
            kept.append(arg)
    return kept


def _after_sweep(run_dir: Path, results_root: Path, baseline_check) -> None:
    """sweep --baseline / --save-baseline: compare the finished run, then store it if it passed."""
    if baseline_check is None:
        return
    from nccl_bench import compare

    exit_code = 0
    if baseline_check.baseline is not None:
        result = compare.check_against_baseline(
            run_dir, baseline_check.baseline, baseline_check.tolerance, baseline_check.allow_mismatch
        )
        _report_comparison(result, {}, os.environ)
        exit_code = result.exit_code
    if baseline_check.save_name is not None:
        if exit_code:
            typer.echo(f"nccl-bench: not saving baseline {baseline_check.save_name!r}: the run regressed", err=True)
        else:
            saved = compare.save_baseline(run_dir, baseline_check.save_name, results_root, baseline_check.replace_baseline)
            typer.echo(f"nccl-bench: saved baseline {baseline_check.save_name!r} to {saved}", err=True)
    if exit_code:
        raise typer.Exit(exit_code)


@app.command("compare")
def compare_command(
    baseline: str = typer.Argument(..., help="Baseline: run folder, results.csv, nccl_bench JSON, nccl-tests log or -J JSON.", metavar="BASELINE"),
    current: str = typer.Argument(..., help="Current run, in any of the same forms.", metavar="CURRENT"),
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
    log_op: str = typer.Option(None, "--op", help="For an nccl-tests log that does not say which collective it ran."),
    log_ranks: int = typer.Option(None, "--ranks", help="For an nccl-tests log that does not say how many ranks ran."),
) -> None:
    """Compare a run against a baseline per op and size; exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench import compare
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.units.sizes import parse_size

    tolerance_fraction = compare.parse_tolerance(tolerance, "--tolerance")
    min_size = parse_size(min_bytes, "--min-bytes")
    outputs = {
        "markdown": check_output_file(markdown and Path(markdown), "--markdown"),
        "junit": check_output_file(junit and Path(junit), "--junit"),
        "json_path": check_output_file(json_file and Path(json_file), "--json"),
    }
    result = compare.compare_paths(
        Path(baseline), Path(current), tolerance=tolerance_fraction, min_bytes=min_size, allow_mismatch=allow_mismatch,
        hints=_log_hints(log_op, log_ranks),
    )
    _report_comparison(result, outputs, os.environ)
    raise typer.Exit(result.exit_code)


def _report_comparison(result, outputs: dict, environ) -> None:
    """Print the table, the failing rows and the summary; write the requested files (shared with sweep)."""
    from nccl_bench.render import compare_exports
    from nccl_bench.render.tables import make_console, print_lines, table_width

    console = make_console()
    print_lines(console, compare_exports.comparison_lines(result, table_width(console)))
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in compare_exports.failure_lines(result):
        console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)
    console.print(
        result.summary(), style="bold red" if result.failures else "bold green", markup=False, highlight=False, soft_wrap=True
    )
    compare_exports.write_exports(result, **outputs)
    summary_file = compare_exports.step_summary_path(environ)
    if summary_file is not None:
        try:
            compare_exports.append_step_summary(result, summary_file)
        except OSError as exc:
            typer.echo(f"nccl-bench: warning: cannot append to $GITHUB_STEP_SUMMARY ({summary_file}): {exc}", err=True)


@app.command("report")
def report_command(
    runs: list[str] = typer.Argument(
        ..., help="Run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.", metavar="RUN..."
    ),
    plot: str = typer.Option(
        None, "--plot", help="Also draw busbw and small-message latency against size into FILE (.png, .svg or .pdf).", metavar="FILE"
    ),
    fmt: str = typer.Option("table", "--format", help="table, markdown, csv, json or nccl-tests."),
    output: str = typer.Option(None, "--output", help="Write the rendering to FILE instead of stdout.", metavar="FILE"),
    log_op: str = typer.Option(None, "--op", help="For an nccl-tests log that does not say which collective it ran."),
    log_ranks: int = typer.Option(None, "--ranks", help="For an nccl-tests log that does not say how many ranks ran."),
    html_file: str = typer.Option(
        None, "--html", help="Also write one self-contained HTML page (tables, plots, compare verdict of two runs).",
        metavar="FILE.html",
    ),
) -> None:
    """Re-render runs (ours or nccl-tests') as a table or another format, and plot them."""
    from nccl_bench.render import formats as render_formats
    from nccl_bench.render.tables import make_console
    from nccl_bench.results import loader

    render_formats.check_format(fmt)
    plot_path = _checked_plot_path(plot)
    output_path = render_formats.check_output_file(output and Path(output), "--output")
    html_path = render_formats.check_output_file(html_file and Path(html_file), "--html", suffix=".html")
    loaded = loader.load_runs([Path(run) for run in runs], hints=_log_hints(log_op, log_ranks))
    if fmt == "table" and not output_path:
        from nccl_bench.render.tables import print_lines, results_lines, table_width

        console = make_console()
        for label, rows in loaded:
            print_lines(console, results_lines(rows, table_width(console), title=label))
    else:
        text = render_formats.render_runs([Path(run) for run in runs], loaded, fmt)
        if output_path:
            output_path.write_text(text, encoding="utf-8")
        else:
            typer.echo(text, nl=False)
    if output_path:
        typer.echo(f"wrote {fmt} to {output_path}", err=True)
    if plot_path:
        from nccl_bench.render import plots as plotting

        plotting.write_plot(loaded, plot_path)
        typer.echo(f"wrote plot to {plot_path}", err=True)
    if html_path:
        from nccl_bench.render import html as html_page

        html_path.write_text(html_page.html_report(html_page.pages_for([Path(run) for run in runs], loaded)), encoding="utf-8")
        typer.echo(f"wrote HTML report to {html_path} ({html_path.stat().st_size / 1024:,.0f} KiB)", err=True)


def _checked_plot_path(plot: Optional[str]) -> Optional[Path]:
    """--plot: a writable .png/.svg/.pdf, and matplotlib present, before any work."""
    if not plot:
        return None
    from nccl_bench.render import plots as plotting
    from nccl_bench.render.formats import check_output_file

    path = check_output_file(Path(plot), "--plot")
    if path.suffix.lower() not in plotting.PLOT_SUFFIXES:
        raise UserInputError("--plot", f"{path} should end in {', '.join(plotting.PLOT_SUFFIXES)}")
    if not plotting.have_matplotlib():
        raise UserInputError("--plot", plotting.MATPLOTLIB_MISSING)
    return path


def _log_hints(op: Optional[str], ranks: Optional[int]):
    """--op/--ranks of report and compare, checked: a known collective, at least 2 ranks."""
    from nccl_bench.results.loader import LogHints

    if op is not None:
        from nccl_bench.options import expand_ops

        names = expand_ops([op])
        if len(names) != 1:
            raise UserInputError("--op", "give one collective")
        op = names[0]
    if ranks is not None and ranks < 1:
        raise UserInputError("--ranks", f"must be at least 1, got {ranks}")
    return LogHints(op, ranks)


@app.command("limits")
def limits_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    multi_node: bool = typer.Option(False, "--multi-node", help="Include the network: min(intra-node peak, NIC per rank)."),
) -> None:
    """Show what the links promise per GPU (NVLink, PCIe) and the peak busbw is compared with."""
    import json

    from nccl_bench.hardware.detect import detect_limits, peak_from_limits

    limits = detect_limits()
    device_kind = "cuda" if limits.gpus else "cpu"
    peak, peak_warnings = peak_from_limits(limits, multi_node, device_kind)
    if as_json:
        from nccl_bench.render.limits import limits_json

        typer.echo(json.dumps(limits_json(limits, peak, peak_warnings), indent=2))
        return
    from nccl_bench.render.limits import limits_lines
    from nccl_bench.render.tables import make_console, print_lines, table_width

    console = make_console()
    print_lines(console, limits_lines(limits, peak, peak_warnings, table_width(console)))


@app.command("doctor")
def doctor_command(
    phase: Optional[list[str]] = typer.Option(None, "--phase", help="nodes (intra-node all_reduce per host), pairs (every node pair, rail by rail) or all (default); repeat or comma-separate."),
    quick: bool = typer.Option(False, "--quick", help="A few random pairings, then suspects re-tested against nodes that passed, instead of all pairs."),
    quick_rounds: Optional[int] = typer.Option(None, "--quick-rounds", help="Random pairings in --quick (default 3)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of --quick's pairings (default 0): the same seed, the same pairs."),
    size: Optional[str] = typer.Option(None, "--size", help="Message size per measurement, e.g. 4M, 256M (default: 256M on GPU, 4M on CPU)."),
    iters: Optional[int] = typer.Option(None, "--iters", help="Exchanges (or all_reduces) per sample (default 4)."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Samples per measurement: verdicts judge the fastest, doctor.csv also has the median (default 3)."),
    warmup: Optional[int] = typer.Option(None, "-w", "--warmup", help="Untimed exchanges before each measurement (default 1)."),
    tolerance: str = typer.Option("20%", "--tolerance", help="Suspect when below the fleet median by more than this (and 3 MAD-sigmas): 20% (default) or 0.2."),
    expect: Optional[float] = typer.Option(None, "--expect", help="Also suspect any pair below this busbw in GB/s (what the fabric should give).", metavar="GBPS"),
    backend: Optional[str] = typer.Option(None, "--backend", help="auto (default: nccl with CUDA, else gloo), nccl, gloo, mpi, ucc."),
    out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default results/<UTC time>_doctor/); must not hold results already."),
    results_root: Optional[Path] = typer.Option(None, "--results-root", help="Parent of the default results folder (default ./results)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds before a stalled exchange or rendezvous fails (default 300)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Without a launcher: start this many local ranks (default: one per GPU, or 2 on CPU)."),
    json_file: Optional[str] = typer.Option(None, "--json", help="Also write the verdicts (doctor.json's schema) to FILE.", metavar="FILE"),
) -> None:
    """Find the slow node, rail or link: every node's all_reduce and every node pair in one launch; exit 1 on a suspect."""
    from nccl_bench.compare import parse_tolerance
    from nccl_bench.doctor import run as doctor
    from nccl_bench.doctor.config import build_config, parse_phases
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.units.sizes import parse_size

    if workers is not None and workers < 1:
        raise UserInputError("--workers", f"must be at least 1, got {workers}")
    config = build_config(
        phases=parse_phases(phase), quick=quick, quick_rounds=quick_rounds, seed=seed,
        size_bytes=parse_size(size, "--size") if size is not None else None, iters=iters, samples=samples,
        warmup=warmup, tolerance=parse_tolerance(tolerance, "--tolerance"), expect_gbps=expect,
        backend=backend.lower() if backend else None, out=out, results_root=results_root, timeout_s=timeout,
    )
    json_path = check_output_file(json_file and Path(json_file), "--json")
    from nccl_bench.ranks.dist import detect_launch

    launch = detect_launch()
    if launch is None:
        _doctor_with_local_workers(config, workers, json_path)
        return
    from nccl_bench.ranks.faults import Interrupted
    from nccl_bench.render.doctor import DoctorReporter

    try:
        report = doctor.execute(config, lambda rank: DoctorReporter() if rank == 0 else doctor.SilentObserver())
    except Interrupted as exc:
        from nccl_bench.ranks.launch import LOCAL_WORKER_ENV

        if launch.rank != 0 or os.environ.get(LOCAL_WORKER_ENV):  # rank 0, or the process that started us, says it once
            raise typer.Exit(130) from None
        _fail(f"interrupted by {exc}; measurements so far are kept", 130)
    if json_path is not None and launch.rank == 0:
        doctor.write_report_json(report, json_path)
    if report.judgement is not None and report.judgement.suspects:
        raise typer.Exit(1)  # every rank: the verdict was reached from the same gathered numbers


def _doctor_with_local_workers(config, workers: Optional[int], json_path: Optional[Path]) -> None:
    """No launcher: check what can be checked, pick the run folder here, start local ranks, read the verdict."""
    import json

    from nccl_bench.doctor.run import DOCTOR_JSON, preflight
    from nccl_bench.ranks.launch import default_workers
    from nccl_bench.results.store import new_run_dir

    why = None
    if workers is None:
        workers, why = default_workers()
    preflight(config, workers)
    default_target = new_run_dir(config.results_root, ["doctor"])
    try:
        _start_local_workers("doctor", workers, why, sys.argv[1:], config.out, default_target, [])
    except RunFailedError:
        verdict_file = (config.out if config.out is not None else default_target) / DOCTOR_JSON
        if not verdict_file.is_file() or json.loads(verdict_file.read_text())["verdict"] != "suspects":
            raise
        raise typer.Exit(1) from None  # the workers reported their suspects; exit 1 says so


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings the core returns about the user's files: one plain line each on stderr."""
    print(f"nccl-bench: warning: {message}", file=sys.stderr, flush=True)


def main() -> None:
    """Console-script entry: one line and a non-zero exit for every known failure, never a traceback."""
    import warnings

    warnings.showwarning = _show_warning
    try:
        command = typer.main.get_command(app)
        _convert_without_pydantic(command)
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        exit_code = command(standalone_mode=False)
        if isinstance(exit_code, int) and exit_code:
            sys.exit(exit_code)
    except UserInputError as exc:
        _print_error(str(exc), exc.exit_code)
    except RunFailedError as exc:
        if exc.exit_at_once:
            _end_stuck_rank(exc)
        if exc.quiet:
            sys.exit(exc.exit_code)
        _print_error(str(exc), exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _print_error("interrupted", 130)
    except _click_usage_errors() as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `nccl-bench`: the help, on stdout
            print(exc.ctx.get_help(), flush=True)
            sys.exit(2)
        message = _click_message(exc)
        if not message:  # no arguments at all: the help was just printed
            sys.exit(2)
        _print_error(message, 2)


class _PlainConversion:
    """Value conversion for options typed str, int, float, bool, Path or a list of str.

    typer >= 0.29 converts every parameter, even an absent one, through a pydantic TypeAdapter
    built on first use, which imports pydantic (~0.1 s) before `sweep --help` or an argument
    error can answer. Every option here needs only these plain conversions; typer calls
    `coerce` on whatever object it holds as the parameter's runtime converter.
    """

    def __init__(self, convert):
        self._convert = convert

    def coerce(self, value, param, ctx):
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        try:
            if isinstance(value, (list, tuple)):
                return [self._convert(item) for item in value]
            return self._convert(value)
        except (TypeError, ValueError):
            raise typer.BadParameter(f"{value!r} is not a valid {self._convert.__name__}.", ctx=ctx, param=param) from None


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(value)


_PLAIN_CONVERSIONS = {str: str, int: int, float: float, bool: _bool, Path: Path, list[str]: str}


def _convert_without_pydantic(group) -> None:
    """Give each parameter a plain converter where typer would build a pydantic one (typer >= 0.29;
    older typer converts through click's types and has no such slot, so nothing changes there)."""
    app_settings = dict(group.context_settings or {})
    for command in (group, *getattr(group, "commands", {}).values()):
        # the help option is made once and cached: made here, it must carry the app's names (-h)
        settings = {**app_settings, **(command.context_settings or {})}
        help_option = command.get_help_option(command.context_class(command, **settings))
        for param in (*command.params, *([help_option] if help_option is not None else [])):
            convert = _PLAIN_CONVERSIONS.get(getattr(getattr(param, "type_descriptor", None), "annotation", None))
            if convert is not None and "_runtime_param" in vars(param) and param._runtime_param is None:
                param._runtime_param = _PlainConversion(convert)


def _print_error(message: str, code: int) -> None:
    print(f"nccl-bench: error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def _click_usage_errors():
    """click's exception base: typer >= 0.2x raises its own vendored copy, not the click package's."""
    bases = {cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"}
    try:
        import click

        bases.add(click.exceptions.ClickException)
    except ImportError:
        pass
    return tuple(bases)


def _click_message(exc) -> str:
    return exc.format_message() if hasattr(exc, "format_message") else str(exc)
