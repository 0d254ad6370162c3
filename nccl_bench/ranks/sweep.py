"""The sweep: plan the points, set up the process group and buffers, measure, check, record.

Runs on every rank. Rank 0 alone writes the run folder and talks to the observer (the CLI's
live reporter); the other ranks get a silent observer. Every finished row is on disk before the
next point starts, and meta.json says how the run ended (complete, interrupted, failed).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nccl_bench import config as cfg
from nccl_bench.errors import RunFailedError, UserInputError, first_line
from nccl_bench.ranks import check, dist, faults
from nccl_bench.ranks.collectives import (
    REGISTRY,
    Collective,
    OpArgs,
    buffer_elems,
    make_buffers,
    round_size,
    store_elems,
)
from nccl_bench.ranks.runner import PointRunner, TimingPlan
from nccl_bench.results.schema import (
    PLACEMENT_IN,
    STATUS_OK,
    STATUS_UNSUPPORTED,
    STATUS_WRONG,
    ResultRow,
)
from nccl_bench.results.store import (
    ResultsWriter,
    new_run_dir,
    prepare_run_dir,
    remove_if_empty,
    write_meta,
)
from nccl_bench.units import bandwidth, stats
from nccl_bench.units.sizes import format_size

# Extra memory per rank besides the buffers: the check's chunked expected values and indices.
CHECK_OVERHEAD_BYTES = check.CHUNK_ELEMS * 8 * 4
# Share of the free memory a sweep may plan to use; the rest is for torch, NCCL and the OS.
MEMORY_HEADROOM = 0.9
# Host memory of one rank's process before any buffer: Python with torch and torch.distributed
# imported is ~218 MiB resident (measured on torch 2.13 CPU); a floor, so it never refuses too much.
RANK_PROCESS_BYTES = 200 * 2**20
# A floor on one collective's time, for the sweep-time estimate: below any NCCL (GPU) or gloo
# (CPU, localhost) latency, so the estimate is a lower bound.
OP_FLOOR_S = {"cuda": 1e-6, "cpu": 5e-6}
LONG_SWEEP_S = 3600.0  # a sweep expected to last longer is announced before it starts
MAX_SWEEP_S = 7 * 24 * 3600.0  # one expected to last longer is refused: it was a typo
FAULT_ENV = "NCCL_BENCH_FAULT"  # test hook: "corrupt" flips one checked element on one rank


@dataclass(frozen=True)
class Point:
    op: str
    placement: str
    size_bytes: int
    send_elems: int
    recv_elems: int


@dataclass(frozen=True)
class RunHeader:
    backend: str
    launcher: str
    world_size: int
    nodes: int
    hostnames: tuple[str, ...]
    devices: tuple[str, ...]
    versions: dict[str, str]
    sizes: str
    iterations: str
    warmup: int
    trials: int
    dtype: str
    reduce_op: str
    agg: str
    run_dir: Path | None
    peak: str | None = None
    notes: tuple[str, ...] = ()


@dataclass
class SweepSummary:
    run_dir: Path | None
    rows: list[ResultRow] = field(default_factory=list)
    status: str = "running"
    notes: list[str] = field(default_factory=list)
    current_point: str | None = None  # what was being measured, for a failure message
    peak_gbps: float | None = None  # the %peak reference, for the plot rank 0's reporter draws
    plot_path: Path | None = None  # set by the reporter that wrote busbw.png

    @property
    def wrong_total(self) -> int:
        return sum(r.wrong or 0 for r in self.rows)


class SweepObserver(Protocol):
    def started(self, header: RunHeader, total_points: int) -> None: ...
    def row_done(self, row: ResultRow) -> None: ...
    def finished(self, summary: SweepSummary) -> None: ...


class SilentObserver:
    def started(self, header: RunHeader, total_points: int) -> None:
        pass

    def row_done(self, row: ResultRow) -> None:
        pass

    def finished(self, summary: SweepSummary) -> None:
        pass


def plan_points(config: cfg.SweepConfig, world_size: int, on_gpu: bool) -> tuple[list[Point], list[str]]:
    """Every (op, placement, size) to measure, sizes rounded as each op and dtype need; and notes."""
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    requested = cfg.resolve_sizes(config, on_gpu)
    points: list[Point] = []
    notes: list[str] = []
    for name in config.ops:
        collective = REGISTRY[name]
        placements = [p for p in collective.placements if config.inplace is None or (p == PLACEMENT_IN) == config.inplace]
        if not placements:
            wanted = "in-place" if config.inplace else "out-of-place"
            notes.append(f"{name} skipped: torch has no {wanted} form of it")
            continue
        if collective.factor is None:
            sizes = [0]
        else:
            sizes = sorted({round_size(collective, s, element_bytes, world_size) for s in requested} - {0})
            if not sizes:
                notes.append(f"{name} skipped: every size is below {element_bytes * world_size} bytes")
        for size in sizes:
            send, recv = buffer_elems(collective, size, element_bytes, world_size)
            for placement in placements:
                points.append(Point(name, placement, size, send, recv))
    return points, notes


def buffer_bytes(points: list[Point], element_bytes: int) -> tuple[int, int]:
    """Bytes of the one send and one receive store that every point's views fit in.

    Only points that take views of a store count towards it (collectives.store_elems), so an
    all_reduce-only sweep allocates no send store at all.
    """
    needs = [store_elems(p.placement, p.send_elems, p.recv_elems) for p in points]
    send = max((s for s, _ in needs), default=0)
    recv = max((r for _, r in needs), default=0)
    return send * element_bytes, recv * element_bytes


def check_memory(
    required_per_rank: int, ranks_sharing: int, available: int | None, where: str, option: str = "--max-bytes"
) -> None:
    """Refuse, before allocating, a sweep whose buffers cannot fit; say the numbers."""
    if available is None:
        return
    needed = required_per_rank * ranks_sharing
    if needed > available * MEMORY_HEADROOM:
        raise UserInputError(
            option,
            f"the sweep needs {needed / 2**20:,.0f} MiB of {where} memory "
            f"({ranks_sharing} rank(s) x {required_per_rank / 2**20:,.0f} MiB) "
            f"but only {available / 2**20:,.0f} MiB is available; lower {option}",
        )


def _size_option(config: cfg.SweepConfig) -> str:
    return "--sizes" if config.sizes is not None else "--max-bytes"


def _bytes_per_rank(config: cfg.SweepConfig, points: list[Point]) -> int:
    send_bytes, recv_bytes = buffer_bytes(points, cfg.DTYPE_BYTES[config.dtype])
    return send_bytes + recv_bytes + CHECK_OVERHEAD_BYTES


def _checked_backend(config: cfg.SweepConfig) -> str:
    import torch

    backend = dist.choose_backend(config.backend, torch.cuda.is_available())
    dist.check_backend_built(backend)
    return backend


def _check_root(config: cfg.SweepConfig, world_size: int) -> None:
    if config.root >= world_size and any(REGISTRY[op].has_root for op in config.ops):
        raise UserInputError("--root", f"{config.root} is not a rank of a world of {world_size}")


def _check_gpu_only_options(config: cfg.SweepConfig, backend: str) -> None:
    """--cuda-graph and --blocking change how CUDA work is timed; on CPU they would only be recorded."""
    if dist.device_kind(backend) == "cuda":
        return
    for option, given in (("--cuda-graph", config.cuda_graph), ("--blocking", config.blocking)):
        if given:
            raise UserInputError(option, f"only applies on GPUs (NCCL); this run uses {backend} on CPU")


def _check_plan(config: cfg.SweepConfig, points: list[Point], notes: list[str], on_gpu: bool) -> list[str]:
    """Refuse a plan with nothing to measure or one that would run for days; say when it runs long."""
    if not points:
        option = "--no-inplace" if config.inplace is False else "--inplace" if config.inplace else "--op"
        raise UserInputError(option, "nothing to measure: " + "; ".join(notes))
    floor_s = stats.sweep_seconds_at_least(
        len(points), config.warmup, config.iters, config.trials,
        cfg.min_sample_ms(config, on_gpu) / 1e3, OP_FLOOR_S["cuda" if on_gpu else "cpu"],
    )
    if floor_s <= LONG_SWEEP_S:
        return []
    timed = f"{config.iters:,} iters" if config.iters is not None else f"{cfg.min_sample_ms(config, on_gpu):g} ms"
    what = (
        f"{len(points):,} point(s) x ({config.warmup:,} warmup + {config.trials:,} trial(s) x {timed})"
    )
    if floor_s > MAX_SWEEP_S:
        warm_s = len(points) * config.warmup * OP_FLOOR_S["cuda" if on_gpu else "cpu"]
        if warm_s > floor_s / 2:
            option = "--warmup"
        elif config.iters is not None:
            option = "--iters" if config.iters > config.trials else "--trials"
        else:  # calibrated samples: their length or their number
            option = "--min-sample-ms" if config.min_sample_ms is not None and config.trials == 1 else "--trials"
        raise UserInputError(
            option,
            f"the sweep would take at least {_duration(floor_s)} ({what}); at most {_duration(MAX_SWEEP_S)}: "
            f"lower {option} or measure fewer sizes",
        )
    return [f"this sweep takes at least {_duration(floor_s)} ({what}); Ctrl-C keeps every finished point"]


def _duration(seconds: float) -> str:
    for unit, length in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= length:
            return f"{seconds / length:,.1f} {unit}"
    return f"{seconds:.0f} s"


@dataclass(frozen=True)
class Plan:
    """What a sweep will do, known before any process group: checked, and comparable with a baseline."""

    backend: str
    points: tuple[Point, ...]
    notes: tuple[str, ...]  # for the run's header: ops or placements skipped
    before_start: tuple[str, ...]  # to say before starting: options ignored, a long expected duration

    def keys(self, config: cfg.SweepConfig) -> set[tuple[str, int, str, str, str]]:
        """(op, size_bytes, dtype, redop, placement) of every point, as result rows will hold them."""
        return {
            (p.op, p.size_bytes, config.dtype, config.reduce_op if REGISTRY[p.op].has_reduction else "none", p.placement)
            for p in self.points
        }


def plan_run(config: cfg.SweepConfig, world_size: int) -> Plan:
    """The checks that need the world size but no process group: backend, the options only a GPU
    uses, --root, and a plan that is empty or would run for days."""
    backend = _checked_backend(config)
    _check_gpu_only_options(config, backend)
    _check_root(config, world_size)
    on_gpu = dist.device_kind(backend) == "cuda"
    points, notes = plan_points(config, world_size, on_gpu)
    before_start = cfg.ignored_options(config) + _check_plan(config, points, notes, on_gpu)
    return Plan(backend, tuple(points), tuple(notes), tuple(before_start))


def preflight(config: cfg.SweepConfig, world_size: int, local_ranks: int) -> Plan:
    """What a launcher-less run can refuse before starting workers: plan_run's checks, and host
    memory for the buffers and the ranks' processes."""
    plan = plan_run(config, world_size)
    on_gpu = dist.device_kind(plan.backend) == "cuda"
    buffers = 0 if on_gpu else _bytes_per_rank(config, list(plan.points))  # GPU memory: each worker checks its own
    option = _size_option(config) if buffers > RANK_PROCESS_BYTES else "--workers"
    check_memory(buffers + RANK_PROCESS_BYTES, local_ranks, host_available_bytes(), "host", option)
    return plan


def host_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def _reduce_op(name: str):
    import torch.distributed as dist_module

    ops = dist_module.ReduceOp
    return {"sum": ops.SUM, "prod": ops.PRODUCT, "min": ops.MIN, "max": ops.MAX, "avg": ops.AVG}[name]


def execute(config: cfg.SweepConfig, observer_factory, argv: list[str] | None = None) -> SweepSummary:
    """Run the sweep on this rank. observer_factory(rank) gives rank 0 its reporter."""
    import torch

    launch = dist.detect_launch()
    if launch is None:
        raise UserInputError("launcher", "no rank layout found (run under torchrun, srun or mpirun, or use --workers)")
    plan = plan_run(config, launch.world_size)
    backend, points, notes = plan.backend, list(plan.points), list(plan.notes)  # before_start: the CLI says it
    on_gpu = dist.device_kind(backend) == "cuda"
    required = _bytes_per_rank(config, points)
    if on_gpu:
        free, _total = torch.cuda.mem_get_info(launch.local_rank)
        check_memory(required, 1, free, f"GPU {launch.local_rank}", _size_option(config))
    else:
        check_memory(required, launch.local_world_size, host_available_bytes(), "host", _size_option(config))
    dist.export_launch_env(launch)  # a missing MASTER_ADDR is named before any folder is made

    run_dir = made = None
    if launch.rank == 0:
        target = config.out if config.out is not None else new_run_dir(config.results_root, config.ops)
        made = None if target.exists() else target  # only a folder this run made is removed again
        run_dir = prepare_run_dir(target, "--out" if config.out is not None else "--results-root")

    summary = SweepSummary(run_dir=run_dir, notes=list(notes))
    try:
        with faults.signals_raise_interrupted(), dist.process_group(launch, backend, config.timeout_s) as ctx:
            _run(config, ctx, launch, points, summary, observer_factory(ctx.rank), argv or sys.argv)
    except RuntimeError as exc:  # process-group set-up or the header exchange; no row was at stake yet
        remove_if_empty(made)
        raise RunFailedError(f"setting up the sweep failed on rank {launch.rank}: {dist.backend_error_text(exc)}") from exc
    except RunFailedError:
        remove_if_empty(made)  # stopped before meta.json: the folder would only say nothing happened
        raise
    except faults.Interrupted as exc:
        if summary.status != "running":  # _run wrote meta.json and how the sweep ended
            raise
        remove_if_empty(made)
        raise faults.Interrupted(str(exc), began=False) from None
    return summary


def _collect_header(config, ctx, launch, summary) -> tuple[RunHeader, dict[str, Any]]:
    import torch

    device_name = torch.cuda.get_device_name(ctx.device) if ctx.on_gpu else _cpu_name()
    per_rank = dist.gather_objects(ctx, (dist.hostname(), device_name))
    hostnames = tuple(h for h, _ in per_rank)
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    if ctx.on_gpu:
        versions["cuda"] = str(torch.version.cuda)
        nccl = torch.cuda.nccl.version()
        versions["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    requested = cfg.resolve_sizes(config, ctx.on_gpu)
    host_default = config.sizes is None and config.min_bytes is None and config.max_bytes is None
    iterations = (
        f"{config.iters} per sample" if config.iters is not None
        else f"auto (each sample >= {cfg.min_sample_ms(config, ctx.on_gpu):g} ms)"
    )
    header = RunHeader(
        backend=ctx.backend,
        launcher=launch.launcher,
        world_size=ctx.world_size,
        nodes=len(set(hostnames)),
        hostnames=tuple(sorted(set(hostnames))),
        devices=tuple(d for _, d in per_rank),
        versions=versions,
        sizes=cfg.describe_sizes(requested) + (" (host default)" if host_default else "")
        + ", each rounded down to whole elements (x ranks for split ops)",
        iterations=iterations,
        warmup=config.warmup,
        trials=config.trials,
        dtype=config.dtype,
        reduce_op=config.reduce_op,
        agg=config.agg,
        run_dir=summary.run_dir,
        notes=tuple(summary.notes),
    )
    return header, {"hostnames": list(hostnames), "devices": [d for _, d in per_rank]}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu: " + (platform.processor() or platform.machine())


def _meta(config, header: RunHeader, per_rank: dict[str, Any], argv: list[str], status: str, started: str) -> dict[str, Any]:
    return {
        "tool": "nccl_bench",
        "schema_version": 1,
        "status": status,
        "started_utc": started,
        "ended_utc": None if status == "running" else _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "command_line": list(getattr(sys, "orig_argv", argv)),
        "backend": header.backend,
        "launcher": header.launcher,
        "world_size": header.world_size,
        "nodes": header.nodes,
        "hostnames": per_rank["hostnames"],
        "devices": per_rank["devices"],
        "versions": header.versions,
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        "config": cfg.as_dict(config),
        "sizes": header.sizes,
        "iterations": header.iterations,
        "notes": list(header.notes),
        "peak": per_rank.get("peak"),
    }


def _run(config, ctx, launch, points, summary: SweepSummary, observer, argv) -> None:
    header, per_rank = _collect_header(config, ctx, launch, summary)
    peak_gbps, peak_label = _reference_peak(config, ctx, header.nodes)
    header = dataclasses.replace(header, peak=peak_label)
    per_rank["peak"] = {"gbps": peak_gbps, "label": peak_label}
    summary.peak_gbps = peak_gbps
    started = _dt.datetime.now(_dt.timezone.utc).isoformat()
    writer = None
    try:  # from the first meta.json on, the run ends with a final one whatever happens
        if ctx.rank == 0:
            write_meta(summary.run_dir, _meta(config, header, per_rank, argv, "running", started))
            writer = ResultsWriter(summary.run_dir)
        observer.started(header, len(points))
        _measure_all(config, ctx, points, header, summary, observer, writer, peak_gbps)
        summary.status = "complete"
    except (faults.Interrupted, Exception) as exc:
        faults.hold_signals()
        where = summary.current_point or "the sweep"
        stop = faults.why_stopped(exc, ctx, config.timeout_s, where, per_rank["hostnames"])
        summary.status = "interrupted" if isinstance(stop, faults.Interrupted) else "failed"
        if stop is exc:
            raise
        raise stop from (exc if not isinstance(exc, faults.Interrupted) else None)
    finally:
        faults.hold_signals()  # a signal after the last row changes nothing: the ending is written whole
        if writer is not None:
            writer.close()
            meta = _meta(config, header, per_rank, argv, summary.status, started)
            meta["rows"] = len(summary.rows)
            meta["wrong_total"] = summary.wrong_total
            write_meta(summary.run_dir, meta)
        observer.finished(summary)


def _reference_peak(config, ctx, nodes: int) -> tuple[float | None, str | None]:
    """The busbw ceiling for %peak: --peak, else what `limits` detects on rank 0, shared with all."""
    if config.peak_gbps is not None:
        return config.peak_gbps, f"{config.peak_gbps:g} GB/s (given with --peak)"
    found = None
    if ctx.rank == 0:
        from nccl_bench.hardware.detect import detect_peak

        peak, warnings = detect_peak(multi_node=nodes > 1, device_kind=ctx.device.type)
        if peak is None:
            found = (None, "unknown (" + "; ".join(warnings) + "); give one with --peak")
        else:
            found = (peak.peak_gbps, f"{peak.peak_gbps:.1f} GB/s per direction, {peak.label} [{peak.source}]")
    return tuple(dist.gather_objects(ctx, found)[0])


def _measure_all(config, ctx, points, header, summary, observer, writer, peak_gbps: float | None) -> None:
    import torch

    dtype = _torch_dtype(config.dtype)
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    send_bytes, recv_bytes = buffer_bytes(points, element_bytes)
    send_store = torch.zeros(max(send_bytes // element_bytes, 1), dtype=dtype, device=ctx.device)
    recv_store = torch.zeros(max(recv_bytes // element_bytes, 1), dtype=dtype, device=ctx.device)
    plan = TimingPlan(
        warmup=config.warmup,
        iters=config.iters,
        min_sample_s=cfg.min_sample_ms(config, ctx.on_gpu) / 1e3,
        trials=config.trials,
        agg=config.agg,
        blocking=config.blocking,
        cuda_graph=config.cuda_graph,
    )
    runner = PointRunner(ctx, plan)
    unsupported: dict[tuple[str, str], str] = {}
    for point in points:
        collective = REGISTRY[point.op]
        if (point.op, point.placement) in unsupported:
            continue
        summary.current_point = f"{point.op} at {format_size(point.size_bytes)} ({point.placement})"
        buffers = make_buffers(collective, point.placement, send_store, recv_store, point.send_elems, point.recv_elems, ctx.rank, ctx.world_size)
        args = OpArgs(ctx.rank, ctx.world_size, config.root, _reduce_op(config.reduce_op) if collective.has_reduction else None)
        reason = _why_unsupported(collective, ctx, buffers, args)
        if reason is not None:
            unsupported[(point.op, point.placement)] = reason
            row = _unsupported_row(config, ctx, header, point, collective, reason, peak_gbps)
        else:
            run_once = collective.bind(buffers, args)
            measurement = runner.measure(run_once)
            wrong = _check(config, ctx, collective, buffers, run_once) if config.check and collective.factor else None
            row = _row(config, ctx, header, point, collective, measurement, wrong, peak_gbps)
        summary.current_point = None
        _record(row, summary, writer, observer)


def _record(row: ResultRow, summary: SweepSummary, writer: ResultsWriter | None, observer) -> None:
    """The row lands whole, in the CSV, the summary and the table, before a signal can stop the sweep."""
    with faults.signals_held():
        summary.rows.append(row)
        if writer is not None:
            writer.append(row)
        observer.row_done(row)


def _why_unsupported(collective: Collective, ctx, buffers, args) -> str | None:
    """Run the op once; if any rank cannot, every rank learns it and the op is skipped, not fatal."""
    if ctx.world_size < collective.min_world_size:
        return f"needs at least {collective.min_world_size} ranks"
    try:
        collective.bind(buffers, args)()
        local_error = None
    except (RuntimeError, NotImplementedError, ValueError, TypeError) as exc:
        local_error = first_line(exc)
    failed = dist.max_across_ranks(ctx, [1.0 if local_error else 0.0])[0]
    if failed:
        return local_error or f"not supported by {ctx.backend} on another rank"
    return None


def _check(config, ctx, collective: Collective, buffers, run_once) -> int:
    buffers.recv.fill_(check.SENTINEL)
    check.fill_input(buffers.send, ctx.rank, config.reduce_op)
    run_once()
    dist.synchronize(ctx)
    segments = collective.expected(ctx.rank, ctx.world_size, config.root, buffers.recv.numel())
    if os.environ.get(FAULT_ENV) == "corrupt" and segments and ctx.rank == (config.root if collective.has_root else 0):
        buffers.recv[segments[0].start] += 1
    wrong = check.count_wrong(buffers.recv, segments, ctx.world_size, config.reduce_op)
    return dist.sum_across_ranks(ctx, wrong)


def _common(config, ctx, header, point, collective, peak_gbps: float | None) -> dict[str, Any]:
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    return dict(
        op=point.op,
        placement=point.placement,
        size_bytes=point.size_bytes,
        count=collective.count(point.size_bytes // element_bytes, ctx.world_size),
        dtype=config.dtype,
        redop=config.reduce_op if collective.has_reduction else "none",
        root=config.root if collective.has_root else -1,
        world_size=ctx.world_size,
        nodes=header.nodes,
        backend=ctx.backend,
        agg=config.agg,
        peak_gbps=peak_gbps,
        busbw_factor=collective.factor(ctx.world_size) if collective.factor else None,
    )


def _row(config, ctx, header, point, collective, measurement, wrong, peak_gbps: float | None) -> ResultRow:
    common = _common(config, ctx, header, point, collective, peak_gbps)
    time_us = measurement.time_us
    factor = common["busbw_factor"]
    algbw = bandwidth.algbw_gbps(point.size_bytes, time_us) if factor is not None else None
    busbw = bandwidth.busbw_gbps(algbw, factor)
    return ResultRow(
        **common,
        iters=measurement.iters,
        trials=len(measurement.sample_means_us),
        time_us=time_us,
        time_min_us=min(measurement.sample_means_us),
        time_max_us=max(measurement.sample_means_us),
        p50_us=stats.percentile(measurement.per_op_us, 50),
        p99_us=stats.percentile(measurement.per_op_us, 99),
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        wrong=wrong,
        slowest_rank=measurement.slowest_rank,
        pct_of_peak=(100 * busbw / peak_gbps) if (busbw is not None and peak_gbps) else None,
        status=STATUS_WRONG if wrong else STATUS_OK,
        flags=";".join(measurement.flags()),
    )


def _unsupported_row(config, ctx, header, point, collective, reason: str, peak_gbps: float | None) -> ResultRow:
    return ResultRow(
        **_common(config, ctx, header, point, collective, peak_gbps),
        iters=0, trials=0, time_us=None, time_min_us=None, time_max_us=None, p50_us=None, p99_us=None,
        algbw_gbps=None, busbw_gbps=None, wrong=None, slowest_rank=None, status=STATUS_UNSUPPORTED, flags=reason.replace(";", ","),
    )
