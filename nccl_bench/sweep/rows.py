"""Result rows of a sweep: one ResultRow per measured (or skipped) point, numbers as nccl-tests defines them.

Pure given a measurement: algbw = size / time, busbw = algbw x the op's bus factor (units/op_table),
p50/p95/p99 and nccl-tests' i_p99 and cv% from per-op times, %peak against the run's reference peak,
the late rank from the ranks' arrivals (units/arrivals.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nccl_bench.hardware.nvls import NVLS_FLAG, nvls_likely
from nccl_bench.ranks.runner import FLAG_EMPTY_GRAPH, Measurement
from nccl_bench.results.schema import STATUS_OK, STATUS_UNSUPPORTED, STATUS_WRONG, ResultRow
from nccl_bench.sweep import sweep_config as cfg
from nccl_bench.sweep.plan import Point
from nccl_bench.units import arrivals, bandwidth, stats
from nccl_bench.units.op_table import PLACEMENT_IN, Collective

# At one rank an in-place collective has nothing to move: NCCL returns from the enqueue without queuing
# GPU work (gloo likewise), so its time is the call's overhead and a bandwidth from it means nothing.
FLAG_ONE_RANK_IN_PLACE = "one_rank_in_place"
# One rank arrived late in every sample (late_rank names it): the others waited for it inside the op.
FLAG_LATE = "late"

# A row whose median single call (p50) is at most this multiple of the per-call floor's (the same op's
# smallest message, one element per rank, timed through the same path in the same run) measures what a
# call costs, not what the fabric moves: its bytes add under a fifth to what a call costs anyway. 1.2 sits
# above the 2-10% trial spread of a quiet run (NOISY_SPREAD is 10%), so a row is not flagged on noise
# alone, and well below the doubling of time that marks sizes where bytes dominate. Medians, not means:
# one scheduler stall on a shared host moves a mean by more than the factor, a median not.
CALL_BOUND_FACTOR = 1.2
FLAG_CALL_BOUND = "call_bound"


def call_bound(time_us: float | None, floor_us: float | None) -> bool:
    """Whether a row's median call (time_us) sits at the per-call floor's median call (CALL_BOUND_FACTOR)."""
    return time_us is not None and floor_us is not None and floor_us > 0 and time_us <= CALL_BOUND_FACTOR * floor_us


@dataclass(frozen=True)
class RowContext:
    """What every row of one run shares."""

    config: cfg.SweepConfig
    world_size: int
    nodes: int
    backend: str
    peak_gbps: float | None
    variant: str = ""  # --nccl-env's settings these ranks run with (units/nccl_env.label)
    nvswitch: bool | None = None  # GPUs behind an NVSwitch (hardware/nvls.py): busbw above the peak is NVLS
    hosts: tuple[str, ...] = ()  # each of the op's ranks' host, in the group's rank order


def _common(run: RowContext, point: Point, collective: Collective) -> dict[str, Any]:
    config = run.config
    element_bytes = cfg.DTYPE_BYTES[config.dtype]
    return dict(
        op=point.op,
        placement=point.placement,
        size_bytes=point.size_bytes,
        count=collective.count(point.size_bytes // element_bytes, run.world_size),
        dtype=config.dtype,
        redop=config.reduce_op if collective.reduces else "none",
        root=config.root if collective.rooted else -1,
        world_size=run.world_size,
        nodes=run.nodes,
        backend=run.backend,
        agg=config.agg,
        peak_gbps=run.peak_gbps,
        busbw_factor=collective.factor(run.world_size) if collective.factor else None,
        variant=run.variant,
    )


def timing_flags(measurement: Measurement, factor: float | None, world_size: int, placement: str,
                 floor_us: float | None) -> list[str]:
    """What a measured row's timing says of it, the sweep's and the replay's alike: the measurement's own
    flags, call_bound at the per-call floor `floor_us`, one_rank_in_place where nothing moves."""
    flags = list(measurement.flags())
    if call_bound(measurement.median_call_us, floor_us):
        flags.append(FLAG_CALL_BOUND)
    if factor is not None and world_size == 1 and placement == PLACEMENT_IN:
        flags.append(FLAG_ONE_RANK_IN_PLACE)
    return flags


def bandwidths(size_bytes: int, time_us: float, factor: float | None,
               flags: list[str]) -> tuple[float | None, float | None]:
    """(algbw, busbw) in GB/s, or (None, None) for a row that moved no bytes: an op without a bus factor
    (barrier), an in-place op of one rank, a replay of an empty CUDA graph (its time is launch overhead)."""
    if factor is None or {FLAG_EMPTY_GRAPH, FLAG_ONE_RANK_IN_PLACE} & set(flags):
        return None, None
    algbw = bandwidth.algbw_gbps(size_bytes, time_us)
    return algbw, bandwidth.busbw_gbps(algbw, factor)


def measured_row(run: RowContext, point: Point, collective: Collective, measurement: Measurement,
                 wrong: int | None, floor_us: float | None = None) -> ResultRow:
    """floor_us: the median call of the op's per-call floor in this run (CALL_BOUND_FACTOR); None: not measured."""
    common = _common(run, point, collective)
    time_us = measurement.time_us
    factor = common["busbw_factor"]
    flags = timing_flags(measurement, factor, run.world_size, point.placement, floor_us)
    algbw, busbw = bandwidths(point.size_bytes, time_us, factor, flags)
    pct = (100 * busbw / run.peak_gbps) if (busbw is not None and run.peak_gbps) else None
    late = (arrivals.late_rank(measurement.arrival_us, measurement.clock_error_us, gaps_us=measurement.gap_us)
            if measurement.arrival_us else None)
    if late is not None:
        flags.append(FLAG_LATE)
    per_op = measurement.per_op_us
    return ResultRow(
        **common,
        iters=measurement.iters,
        trials=len(measurement.sample_means_us),
        time_us=time_us,
        time_min_us=min(measurement.sample_means_us),
        time_max_us=max(measurement.sample_means_us),
        p50_us=stats.percentile(measurement.per_op_us, 50),
        p95_us=stats.percentile(measurement.per_op_us, 95),
        p99_us=stats.percentile(measurement.per_op_us, 99),
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        wrong=wrong,
        max_time_rank=measurement.max_time_rank,
        pct_of_peak=pct,
        status=STATUS_WRONG if wrong else STATUS_OK,
        flags=";".join(flags + ([NVLS_FLAG] if nvls_likely(point.op, pct, run.nvswitch) else [])),
        late_rank=None if late is None else late.rank,
        late_host=run.hosts[late.rank] if late is not None and late.rank < len(run.hosts) else "",
        late_us=None if late is None else late.excess_us,
        i_p99_us=arrivals.nearest_rank_percentile(per_op, 99) if per_op else None,
        i_cv_pct=arrivals.cv_pct(per_op),
    )


def unsupported_row(run: RowContext, point: Point, collective: Collective, reason: str) -> ResultRow:
    return ResultRow(
        **_common(run, point, collective),
        iters=0, trials=0, time_us=None, time_min_us=None, time_max_us=None, p50_us=None, p99_us=None,
        algbw_gbps=None, busbw_gbps=None, wrong=None, max_time_rank=None, status=STATUS_UNSUPPORTED,
        flags=reason.replace(";", ","),
    )
