"""The sweep's plan, known before any process group: points, refusals, and what to say before starting.

Testable without ranks: it needs the config, the world size and the torch version, nothing else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nccl_bench.errors import OptionError, off
from nccl_bench.ranks import check, devices, graph_capture, split
from nccl_bench.ranks.collectives import store_elems
from nccl_bench.ranks.nccl_trace import debug_conflict
from nccl_bench.ranks.preflight import check_local_workers, chosen_backend
from nccl_bench.results.schema import PLACEMENT_IN
from nccl_bench.sweep import sweep_config as cfg
from nccl_bench.units import stats
from nccl_bench.units.op_table import OPS, buffer_elems, bus_factor, round_size

# Extra memory per rank besides the buffers: the check's chunked expected values and indices.
CHECK_OVERHEAD_BYTES = check.CHUNK_ELEMS * 8 * 4


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


def graph_exclusions(config: cfg.SweepConfig, on_gpu: bool, torch_version: str | None) -> dict[str, str]:
    """Ops that --cuda-graph cannot capture here, and why (they are skipped with a note)."""
    return graph_capture.graph_exclusions(config.cuda_graph, config.ops, on_gpu, torch_version,
                                          cfg.option_name("cuda_graph"), f"{{ops}} {','.join(config.ops)}", ("ops",))


def plan_points(config: cfg.SweepConfig, world_size: int, on_gpu: bool,
                torch_version: str | None = None) -> tuple[list[Point], list[str]]:
    """Every (op, placement, size) to measure, sizes rounded as each op and dtype need; and notes."""
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    requested = cfg.resolve_sizes(config, on_gpu)
    points: list[Point] = []
    notes: list[str] = []
    excluded = graph_exclusions(config, on_gpu, torch_version)
    for name in config.ops:
        collective = OPS[name]
        if name in excluded:
            notes.append(f"{name} skipped: {excluded[name]}")
            continue
        placements = [
            p for p in collective.placements if config.inplace is None or (p == PLACEMENT_IN) == config.inplace
        ]
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
    if any(p.op == "all_to_allv" for p in points):
        notes.append(alltoallv_note(config.alltoallv, world_size))
    return points, notes


def alltoallv_note(distribution: str, world_size: int) -> str:
    from nccl_bench.units import alltoallv

    sent = alltoallv.mean_share(alltoallv.shares(alltoallv.parse_distribution(distribution), world_size))
    return (f"all_to_allv shares {distribution}: {sent:.0%} of each size is sent; size and busbw count the whole "
            "buffer, as nccl-tests' alltoallv does")


def buffer_bytes(points: list[Point], element_bytes: int) -> tuple[int, int]:
    """Bytes of the one send and one receive store that every point's views fit in.

    Only points that take views of a store count towards it (collectives.store_elems), so an
    all_reduce-only sweep allocates no send store at all.
    """
    needs = [store_elems(p.placement, p.send_elems, p.recv_elems) for p in points]
    send = max((s for s, _ in needs), default=0)
    recv = max((r for _, r in needs), default=0)
    return send * element_bytes, recv * element_bytes


def size_option(config: cfg.SweepConfig) -> str:
    """The option (its key) that makes the buffers large, named when memory is short."""
    return "sizes" if config.sizes is not None else "max_bytes"


def _check_root(config: cfg.SweepConfig, world_size: int) -> None:
    if config.root >= world_size and any(OPS[op].rooted for op in config.ops):
        raise OptionError("root", f"{config.root} is not a rank of a world of {world_size}")


def _check_busbw_floor(config: cfg.SweepConfig, world_size: int) -> None:
    """--min-busbw judges busbw, which an (n-1)/n collective at one rank has at 0 by definition: such a run
    would fail every such op whatever its speed (and pass broadcast at copy speed), so it is refused."""
    if config.min_busbw_gbps is None:
        return
    zero = [op for op in config.ops if bus_factor(op, world_size) == 0]
    if zero:
        raise OptionError("min_busbw_gbps", f"busbw is 0 by definition at {world_size} rank for {', '.join(zero)} "
                          "((n-1)/n of the data crosses between ranks); judge a run of 2 ranks or more")


def _check_trace(config: cfg.SweepConfig) -> None:
    """--nccl-trace keeps the user's NCCL debug settings or refuses them here, before anything runs."""
    conflict = debug_conflict(os.environ) if config.nccl_trace else None
    if conflict is not None:
        raise OptionError("nccl_trace", conflict)


def _check_plan(config: cfg.SweepConfig, points: list[Point], notes: list[str], on_gpu: bool) -> list[str]:
    """Refuse a plan with nothing to measure or one that would run for days; say when it runs long."""
    if not points:
        key = off("inplace") if config.inplace is False else "inplace" if config.inplace else "ops"
        raise OptionError(key, "nothing to measure: " + "; ".join(notes))
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
            key = "warmup"
        elif config.iters is not None:
            key = "iters" if config.iters > config.trials else "trials"
        else:  # calibrated samples: their length or their number
            by_length = config.min_sample_ms is not None and config.trials == 1
            key = "min_sample_ms" if by_length else "trials"
        raise OptionError(
            key,
            f"the sweep would take at least {_duration(floor_s)} ({what}); at most {_duration(MAX_SWEEP_S)}: "
            f"lower {{{key}}} or measure fewer sizes", mentions=(key,),
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
    group_size: int = 0  # the ranks one collective spans: the world's, or each --split group's

    def keys(self, config: cfg.SweepConfig) -> set[tuple[str, int, str, str, str]]:
        """(op, size_bytes, dtype, redop, placement) of every point, as result rows will hold them."""
        return {
            (
                p.op, p.size_bytes, config.dtype, config.reduce_op if OPS[p.op].reduces else "none",
                p.placement,
            )
            for p in self.points
        }

    def bytes_per_rank(self, config: cfg.SweepConfig) -> int:
        """Buffers one rank allocates: the largest send and receive views, and the check's chunks."""
        send_bytes, recv_bytes = buffer_bytes(list(self.points), cfg.DTYPE_BYTES[config.dtype])
        return send_bytes + recv_bytes + CHECK_OVERHEAD_BYTES


def group_size(config: cfg.SweepConfig, world_size: int, ranks_per_host: int) -> int:
    """The ranks one collective spans: the world, or each --split group."""
    if config.split is None:
        return world_size
    try:
        return split.group_size(config.split, world_size, ranks_per_host)
    except ValueError as exc:
        raise OptionError("split", str(exc)) from None


def plan_run(config: cfg.SweepConfig, world_size: int, torch_version: str | None = None,
             ranks_per_host: int | None = None) -> Plan:
    """The checks that need the world size but no process group: backend, the options only a GPU
    uses, --root, and a plan that is empty or would run for days. With --split, sizes are those of
    one group (ranks_per_host: the launcher's local world size; None: every rank on one host)."""
    world_size = group_size(config, world_size, ranks_per_host or world_size)
    backend = chosen_backend(config.backend)
    graph_capture.refuse_gpu_only({"cuda_graph": config.cuda_graph, "blocking": config.blocking}, backend)
    _check_trace(config)
    _check_root(config, world_size)
    _check_busbw_floor(config, world_size)
    on_gpu = devices.device_kind(backend) == "cuda"
    points, notes = plan_points(config, world_size, on_gpu, torch_version)  # on GPU: --cuda-graph refusals
    before_start = cfg.ignored_options(config) + _check_plan(config, points, notes, on_gpu)
    return Plan(backend, tuple(points), tuple(notes), tuple(before_start), world_size)


def preflight(config: cfg.SweepConfig, world_size: int, local_ranks: int) -> Plan:
    """What a launcher-less run can refuse before starting workers: plan_run's checks, the GPUs the
    workers need, and host memory for the buffers and the ranks' processes."""
    import torch

    plan = plan_run(config, world_size, torch.__version__, local_ranks)
    check_local_workers("sweep", plan.backend, local_ranks, plan.bytes_per_rank(config), size_option(config))
    return plan
