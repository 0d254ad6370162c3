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
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nccl_bench import config as cfg
from nccl_bench.errors import RunFailedError, UserInputError, first_line
from nccl_bench.ranks import check, dist, faults
from nccl_bench.ranks.deadline import Deadline, DeadlineExceeded
from nccl_bench.ranks.collectives import (
    REGISTRY,
    Collective,
    OpArgs,
    buffer_elems,
    make_buffers,
    round_size,
    store_elems,
)
from nccl_bench.ranks.runner import FLAG_EMPTY_GRAPH, PointRunner, TimingPlan
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
NO_PEAK_ONE_RANK = "none: a world of 1 rank crosses no link (give one with --peak)"
# Host memory of one rank's process before any buffer: Python with torch and torch.distributed
# imported is ~218 MiB resident (measured on torch 2.13 CPU); a floor, so it never refuses too much.
RANK_PROCESS_BYTES = 200 * 2**20
# A floor on one collective's time, for the sweep-time estimate: below any NCCL (GPU) or gloo
# (CPU, localhost) latency, so the estimate is a lower bound.
OP_FLOOR_S = {"cuda": 1e-6, "cpu": 5e-6}
LONG_SWEEP_S = 3600.0  # a sweep expected to last longer is announced before it starts
MAX_SWEEP_S = 7 * 24 * 3600.0  # one expected to last longer is refused: it was a typo


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
    # (op, size_bytes, count) of every planned point: the live table sizes its columns from them
    planned: tuple[tuple[str, int, int], ...] = ()


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


# torch captures point-to-point NCCL ops in a CUDA graph only from 2.7 on (pytorch #148462; on 2.4
# the capture fails, pytorch #133984).
GRAPH_P2P_SINCE = (2, 7)


def graph_exclusions(config: cfg.SweepConfig, on_gpu: bool, torch_version: str | None) -> dict[str, str]:
    """Ops that --cuda-graph cannot capture here, and why (they are skipped with a note)."""
    if not (config.cuda_graph and on_gpu):
        return {}
    excluded = {}
    for name in config.ops:
        if REGISTRY[name].factor is None:  # barrier: ProcessGroupNCCL's ends in a CPU-side stream sync
            excluded[name] = "--cuda-graph captures only ops with a bandwidth factor (a barrier synchronizes the CPU)"
        elif name == "sendrecv" and torch_version and dist.version_tuple(torch_version) < GRAPH_P2P_SINCE:
            excluded[name] = f"--cuda-graph cannot capture point-to-point ops on torch {torch_version} (needs >= 2.7)"
    if excluded and len(excluded) == len(config.ops):
        raise UserInputError("--cuda-graph", f"nothing left to capture in --op {','.join(config.ops)}: "
                             + "; ".join(f"{op}: {why}" for op, why in excluded.items()))
    return excluded


def plan_points(config: cfg.SweepConfig, world_size: int, on_gpu: bool,
                torch_version: str | None = None) -> tuple[list[Point], list[str]]:
    """Every (op, placement, size) to measure, sizes rounded as each op and dtype need; and notes."""
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    requested = cfg.resolve_sizes(config, on_gpu)
    points: list[Point] = []
    notes: list[str] = []
    excluded = graph_exclusions(config, on_gpu, torch_version)
    for name in config.ops:
        collective = REGISTRY[name]
        if name in excluded:
            notes.append(f"{name} skipped: {excluded[name]}")
            continue
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


def plan_run(config: cfg.SweepConfig, world_size: int, torch_version: str | None = None) -> Plan:
    """The checks that need the world size but no process group: backend, the options only a GPU
    uses, --root, and a plan that is empty or would run for days."""
    backend = _checked_backend(config)
    _check_gpu_only_options(config, backend)
    _check_root(config, world_size)
    on_gpu = dist.device_kind(backend) == "cuda"
    points, notes = plan_points(config, world_size, on_gpu, torch_version)  # on GPU: --cuda-graph refusals
    before_start = cfg.ignored_options(config) + _check_plan(config, points, notes, on_gpu)
    return Plan(backend, tuple(points), tuple(notes), tuple(before_start))


def preflight(config: cfg.SweepConfig, world_size: int, local_ranks: int) -> Plan:
    """What a launcher-less run can refuse before starting workers: plan_run's checks, the GPUs the
    workers need, and host memory for the buffers and the ranks' processes."""
    import torch

    plan = plan_run(config, world_size, torch.__version__)
    on_gpu = dist.device_kind(plan.backend) == "cuda"
    if on_gpu:
        dist.check_workers_fit(local_ranks, torch.cuda.device_count())
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


def execute(config: cfg.SweepConfig, observer_factory, argv: list[str] | None = None,
            on_stuck=None, plan: Plan | None = None) -> SweepSummary:
    """Run the sweep on this rank. observer_factory(rank) gives rank 0 its reporter; `plan` is
    plan_run's answer when the caller already has it (the CLI checks it against a baseline first).

    on_stuck(RunFailedError): called from the deadline's thread when a stalled step cannot be ended
    by aborting the process group (meta.json already says failed); it should report and end the
    process. Without it a rank stuck outside any collective stays stuck.
    """
    import torch

    launch = dist.detect_launch()
    if launch is None:
        raise UserInputError("launcher", "no rank layout found (run under torchrun, srun or mpirun, or use --workers)")
    if plan is None:
        plan = plan_run(config, launch.world_size, torch.__version__)
    backend, points, notes = plan.backend, list(plan.points), list(plan.notes)  # before_start: the CLI says it
    on_gpu = dist.device_kind(backend) == "cuda"
    required = _bytes_per_rank(config, points)
    device_index = None
    if on_gpu:
        device_index = dist.cuda_device_index(
            launch.local_rank, launch.local_world_size, torch.cuda.device_count(), os.environ, launch.launcher)
        free, _total = torch.cuda.mem_get_info(device_index)
        check_memory(required, 1, free, f"GPU {device_index}", _size_option(config))
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
        with faults.signals_raise_interrupted(), \
                dist.process_group(launch, backend, config.timeout_s, device_index) as ctx:
            _run(config, ctx, launch, points, summary, observer_factory(ctx.rank), argv or sys.argv, on_stuck)
    except RuntimeError as exc:  # process-group set-up or the header exchange; no row was at stake yet
        remove_if_empty(made)
        reason = faults.name_timeout(dist.backend_error_text(exc), config.timeout_s)
        raise RunFailedError(f"setting up the sweep failed on rank {launch.rank}: {reason}") from exc
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
        else f"auto (calibrated for samples of {cfg.min_sample_ms(config, ctx.on_gpu):g} ms; the end says how long they were)"
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


# Variables that steer NCCL and torch's NCCL process group (watchdog, error handling, flight
# recorder); the rest of the environment is never recorded.
RECORDED_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_")


def recorded_env(environ) -> dict[str, str]:
    return {k: v for k, v in sorted(environ.items()) if k.startswith(RECORDED_ENV_PREFIXES)}


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
        # Environment variables as this rank saw them (not versions: a container's NCCL_VERSION
        # names the NCCL it was built for; versions["nccl"] is the library torch loaded).
        "env": recorded_env(os.environ),
        "config": cfg.as_dict(config),
        "sizes": header.sizes,
        "iterations": header.iterations,
        "notes": list(header.notes),
        "peak": per_rank.get("peak"),
    }


class _Ending:
    """The final meta.json, written once: by the main thread, or by the deadline's thread for a rank
    whose main thread is stuck for good."""

    def __init__(self, write):
        self._write, self._lock, self.done = write, threading.Lock(), False

    def __call__(self, status: str) -> None:
        with self._lock:
            if not self.done:
                self.done = True
                self._write(status)


def _run(config, ctx, launch, points, summary: SweepSummary, observer, argv, on_stuck=None) -> None:
    try:
        header, per_rank = _collect_header(config, ctx, launch, summary)
        peak_gbps, peak_label = _reference_peak(config, ctx, header.nodes)
    except Exception as exc:  # the header exchange: report it as any failed collective is
        raise faults.why_stopped(exc, ctx, config.timeout_s, "setting up the sweep", None) from exc
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    planned = tuple((p.op, p.size_bytes, REGISTRY[p.op].count(p.size_bytes // element_bytes, ctx.world_size)) for p in points)
    header = dataclasses.replace(header, peak=peak_label, planned=planned)
    per_rank["peak"] = {"gbps": peak_gbps, "label": peak_label}
    summary.peak_gbps = peak_gbps
    started = _dt.datetime.now(_dt.timezone.utc).isoformat()
    writers: list[ResultsWriter] = []

    def write_final(status: str) -> None:
        summary.status = status
        for writer in writers:
            writer.close()
            meta = _meta(config, header, per_rank, argv, status, started)
            meta["rows"] = len(summary.rows)
            meta["wrong_total"] = summary.wrong_total
            write_meta(summary.run_dir, meta)

    ending = _Ending(write_final)

    def stuck(exc: DeadlineExceeded) -> None:  # on the deadline's thread
        failure = faults.abandoned(exc, ctx, exc.where)
        ending("failed")
        on_stuck(failure)

    def abort(exc: DeadlineExceeded) -> None:  # on a thread of the deadline's
        faults.record_stall(exc, ctx)
        # Looked up now, not held: a reference kept past destroy_process_group would let the
        # group's destructor run at interpreter exit ("terminate called without an active exception").
        dist.abort_group(dist.default_group())

    deadline = Deadline(config.timeout_s, abort, stuck if on_stuck else None)
    try:  # from the first meta.json on, the run ends with a final one whatever happens
        if ctx.rank == 0:
            write_meta(summary.run_dir, _meta(config, header, per_rank, argv, "running", started))
            writers.append(ResultsWriter(summary.run_dir))
        observer.started(header, len(points))
        with deadline:
            _measure_all(config, ctx, points, header, summary, observer, writers[0] if writers else None,
                         peak_gbps, deadline)
        summary.status = "complete"
    except (faults.Interrupted, Exception) as exc:
        deadline.close()  # the main thread is back: the roll call below must not be taken for a stall
        faults.hold_signals()
        if deadline.expired is not None and not isinstance(exc, faults.Interrupted):
            exc = DeadlineExceeded(deadline.expired, config.timeout_s)  # what the abort made the op raise
        where = summary.current_point or "the sweep"
        stop = faults.why_stopped(exc, ctx, config.timeout_s, where, per_rank["hostnames"])
        summary.status = "interrupted" if isinstance(stop, faults.Interrupted) else "failed"
        if isinstance(stop, RunFailedError):
            stop.exit_at_once = deadline.expired is not None
        if stop is exc:
            raise
        raise stop from (exc if not isinstance(exc, faults.Interrupted) else None)
    finally:
        faults.hold_signals()  # a signal after the last row changes nothing: the ending is written whole
        ending(summary.status)
        observer.finished(summary)


def _reference_peak(config, ctx, nodes: int) -> tuple[float | None, str | None]:
    """The busbw ceiling for %peak: --peak, else what `limits` detects on rank 0, shared with all."""
    if config.peak_gbps is not None:
        return config.peak_gbps, f"{config.peak_gbps:g} GB/s (given with --peak)"
    if ctx.world_size == 1:  # busbw of one rank crosses no link (broadcast's reads 25,935 GB/s on an H100)
        return None, NO_PEAK_ONE_RANK
    found = None
    if ctx.rank == 0:
        from nccl_bench.hardware.detect import detect_peak

        peak, warnings = detect_peak(multi_node=nodes > 1, device_kind=ctx.device.type)
        if peak is None:
            found = (None, "unknown (" + "; ".join(warnings) + "); give one with --peak")
        else:
            found = (peak.peak_gbps, f"{peak.peak_gbps:.1f} GB/s per direction, {peak.label} [{peak.source}]")
    return tuple(dist.gather_objects(ctx, found)[0])


def _measure_all(config, ctx, points, header, summary, observer, writer, peak_gbps: float | None,
                 deadline: Deadline | None = None) -> None:
    import torch

    renew = deadline.renew if deadline is not None else (lambda where=None: None)
    fault = faults.planted_fault(os.environ)

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
    runner = PointRunner(ctx, plan, progress=renew)
    unsupported: dict[tuple[str, str], str] = {}
    for index, point in enumerate(points):
        collective = REGISTRY[point.op]
        if (point.op, point.placement) in unsupported:
            continue
        summary.current_point = f"{point.op} at {format_size(point.size_bytes)} ({point.placement})"
        renew(summary.current_point)
        if fault is not None and fault.kind != "corrupt" and (fault.rank, fault.point) == (ctx.rank, index):
            faults.stall(fault)
        buffers = make_buffers(collective, point.placement, send_store, recv_store, point.send_elems, point.recv_elems, ctx.rank, ctx.world_size)
        args = OpArgs(ctx.rank, ctx.world_size, config.root, _reduce_op(config.reduce_op) if collective.has_reduction else None)
        reason = _why_unsupported(collective, ctx, buffers, args)
        if reason is not None:
            unsupported[(point.op, point.placement)] = reason
            row = _unsupported_row(config, ctx, header, point, collective, reason, peak_gbps)
        else:
            run_once = collective.bind(buffers, args)
            measurement = runner.measure(run_once)
            renew()
            corrupt = fault is not None and fault.kind == "corrupt"
            wrong = _check(config, ctx, collective, buffers, run_once, corrupt) if config.check and collective.factor else None
            row = _row(config, ctx, header, point, collective, measurement, wrong, peak_gbps)
        if deadline is not None:
            deadline.disarm()
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


def _check(config, ctx, collective: Collective, buffers, run_once, corrupt: bool = False) -> int:
    buffers.recv.fill_(check.SENTINEL)
    check.fill_input(buffers.send, ctx.rank, config.reduce_op)
    run_once()
    dist.synchronize(ctx)
    segments = collective.expected(ctx.rank, ctx.world_size, config.root, buffers.recv.numel())
    if corrupt and segments and ctx.rank == (config.root if collective.has_root else 0):
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
    flags = measurement.flags()
    # A replay of an empty graph moved no bytes: its time is launch overhead, not a bandwidth.
    moved = factor is not None and FLAG_EMPTY_GRAPH not in flags
    algbw = bandwidth.algbw_gbps(point.size_bytes, time_us) if moved else None
    busbw = bandwidth.busbw_gbps(algbw, factor) if moved else None
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
        flags=";".join(flags),
    )


def _unsupported_row(config, ctx, header, point, collective, reason: str, peak_gbps: float | None) -> ResultRow:
    return ResultRow(
        **_common(config, ctx, header, point, collective, peak_gbps),
        iters=0, trials=0, time_us=None, time_min_us=None, time_max_us=None, p50_us=None, p99_us=None,
        algbw_gbps=None, busbw_gbps=None, wrong=None, slowest_rank=None, status=STATUS_UNSUPPORTED, flags=reason.replace(";", ","),
    )
