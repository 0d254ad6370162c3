"""Warmup, calibration and timed iterations for one point: the one place that touches timing.

A timed sample is: barrier, start, `iters` ops back to back, (GPU) synchronize, stop; its time
per op is the sample's duration / iters, and ranks' durations are combined by `agg` (default
max: a collective is as slow as its slowest rank). With --iters auto, a first sample that came
out shorter than --min-sample-ms (calibration saw a clean block, the sample did not) is
extended by more timed ops, so samples last the floor they promise. On GPU the clock is CUDA events on the
current stream; on CPU time.perf_counter_ns. A timestamp after every op gives per-op latencies
(p50/p99). On CPU that costs one clock read per op (~0.1 us against >= 20 us for a gloo op), so
every sample carries them. On GPU an event record costs microseconds of CPU per op, which
launch-bound small messages would show as extra time per op, so the timed samples record only
the loop's two ends (as nccl-tests does) and one extra sample records an event per op; that sample's
excess time per op over the timed samples (the events' own cost, when ops are launch-bound) is taken
off each of its ops (per_event_cost_s), so p50 and the mean time describe the same work. CUDA events
come from a pool kept by the runner; a new one is recorded once as it joins the pool, before the
sample's barrier, because torch creates the CUDA event lazily on first record (cudaEventCreate would
otherwise run inside the timed loop and, with --blocking, inside every op's time).

Arrivals: on CPU the clock is also read as each op is called, so each rank's time inside the op and
its lateness behind the earliest rank (clocks aligned from barrier exits at the point's start,
units/arrivals.py) are known; they are reduced and gathered after the sample, never inside it. On GPU
the host clock is read once, as the sample starts (its first op's arrival).

The per-call floor a row is judged against (CallFloors: the smallest message's median call, once per op of
a run) is timed here too, by the same runner under its own plan, for the sweep and the replay alike.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Hashable

from nccl_bench.ranks import dist
from nccl_bench.ranks.clocks import CpuClock, CudaClock, EventPool, per_event_cost_s, without_event_cost
from nccl_bench.units import arrivals, stats

# Never fewer than this many ops in a sample: one op cannot show back-to-back throughput.
MIN_AUTO_ITERS = 3
# Cap for tiny messages, bounding memory for per-op timestamps and a point's wall time.
MAX_AUTO_ITERS = 100_000
# Per-op latencies pooled over a point's trials for p50/p99: the first this many are kept, so
# memory does not grow with --trials x --iters (a million is far more than percentiles need).
MAX_KEPT_LATENCIES = 1_000_000

# A calibration block must last at least this fraction of a sample before its per-op time is
# trusted (>= 2.5 ms at the GPU default, 10 ms on CPU: thousands of timer ticks). Calibration
# is pure overhead, and every block also costs a barrier and a cross-rank reduction, so it is
# kept short and few: at 10% with 10x growth it took ~20% of a quick sweep's wall time.
CALIBRATION_FRACTION = 0.05
# Growth of the calibration block between rounds: usually one jump from a single op straight
# to the block the measured rate asks for, without overshooting a huge message's sample.
CALIBRATION_MAX_GROWTH = 100
# With --iters auto, a first timed sample shorter than --min-sample-ms is extended by more ops
# (at most this many times), their count from that sample's own rate. On a shared CPU host one
# calibration block's rate can be 5x off, which gave 1 MiB samples of 56 ms instead of 200 ms.
MAX_SAMPLE_EXTENSIONS = 2
# Aim this far past the missing time, so a little jitter does not leave the sample short again.
SAMPLE_TARGET_MARGIN = 1.2
# A sample shorter than this many timer ticks cannot be trusted to 0.1%.
MIN_TICKS_PER_SAMPLE = 1000
NOISY_SPREAD = 0.10  # trial range above 10% of the median marks a row noisy (pyperf-like)
# What torch warns (TORCH_WARN in CUDAGraph::capture_end, every time) when a capture holds no GPU
# work: NCCL enqueues nothing for an in-place collective of one rank, so a replay times nothing.
EMPTY_GRAPH_WARNING = "The CUDA Graph is empty"
FLAG_EMPTY_GRAPH = "empty_cuda_graph"
# Barriers read at the start of every point to align the ranks' clocks (units/arrivals.align_clocks):
# enough rounds that the median ignores a few descheduled exits; each costs one barrier, outside timing.
ALIGN_ROUNDS = 15
# The per-call floor (CallFloors; sweep/rows.CALL_BOUND_FACTOR) is the median of this many timed calls of the
# smallest message after a few warm-up calls, whatever --iters, --trials and --min-sample-ms ask of the rows:
# a median of 50 is within a few percent of the call's typical cost, well inside the factor's 20%, and 55
# calls of the smallest message add milliseconds to a run, not a sample per op.
FLOOR_CALLS = 50
FLOOR_WARMUP = 5


@dataclass(frozen=True)
class TimingPlan:
    warmup: int
    iters: int | None  # None = calibrate
    min_sample_s: float
    trials: int
    agg: str
    blocking: bool = False
    cuda_graph: int = 0


@dataclass(frozen=True)
class Measurement:
    iters: int  # ops per timed sample
    sample_means_us: tuple[float, ...]  # per trial, ranks combined by agg
    per_op_us: tuple[float, ...]  # every timed op's latency, max over ranks, all trials pooled
    max_time_rank: int
    shortest_sample_s: float
    timer_resolution_s: float
    empty_graph: bool = False  # the captured CUDA graph held no GPU work
    # Per trial, per rank (the group's ranks, in order): its mean time inside the op and its arrival
    # offset (median lateness behind the earliest rank, aligned clocks), microseconds; and per rank the
    # error of its clock's alignment.
    in_op_us: tuple[tuple[float, ...], ...] = ()
    arrival_us: tuple[tuple[float, ...], ...] = ()
    clock_error_us: tuple[float, ...] = ()
    # Per trial, per rank: the median over the trial's ops of the rank's own time outside the op before
    # calling it (us; None where not known: on GPU).
    gap_us: tuple[tuple[float | None, ...], ...] = ()

    @property
    def time_us(self) -> float:
        return stats.median(self.sample_means_us)

    @property
    def median_call_us(self) -> float | None:
        """The median single call (p50) over every timed op; None where none was timed one by one."""
        return stats.percentile(self.per_op_us, 50) if self.per_op_us else None

    def flags(self) -> list[str]:
        flags = []
        if len(self.sample_means_us) > 1:
            spread = stats.relative_spread(min(self.sample_means_us), max(self.sample_means_us), self.time_us)
            if spread > NOISY_SPREAD:
                flags.append("noisy")
        if self.shortest_sample_s < MIN_TICKS_PER_SAMPLE * self.timer_resolution_s:
            flags.append("below_timer_resolution")
        if self.empty_graph:
            flags.append(FLAG_EMPTY_GRAPH)
        return flags


def captured_nothing(caught: list) -> bool:
    """Whether the warnings caught around a capture include torch's empty-graph warning."""
    return any(EMPTY_GRAPH_WARNING in str(w.message) for w in caught)


def next_calibration_calls(
    calls: int, elapsed_s: float, target_s: float, max_calls: int, long_call_s: float = math.inf,
    first: bool = False,
) -> int | None:
    """The next calibration block size after `calls` took `elapsed_s`, or None when done.

    Done once a block lasts target_s (or hits max_calls). A single call may end calibration only
    when it lasts long_call_s (an op so slow that the minimum iterations fill a sample), and the
    first block only after it was measured twice: on a shared host one call is often one scheduler
    stall, and trusting it made 1K samples last 6 ms instead of 200 (and gave an out-of-place
    reduce_scatter of 2 KiB on an H100 3 iters, under the timer's resolution). Otherwise aim 20%
    past the target from the measured rate, but at least double and at most
    CALIBRATION_MAX_GROWTH-fold, so one slow outlier block cannot make the next one huge.
    """
    if calls >= max_calls:
        return None
    if elapsed_s >= target_s and (calls > 1 or elapsed_s >= long_call_s):
        return calls if first else None  # the faster of the two measurements of a first block counts
    estimate = math.ceil(calls * target_s / max(elapsed_s, 1e-9) * 1.2)
    return min(max_calls, max(calls * 2, min(calls * CALIBRATION_MAX_GROWTH, estimate)))


def calls_to_fill_sample(calls: int, elapsed_s: float, min_sample_s: float, max_calls: int) -> int:
    """Ops to add to a sample of `calls` that lasted elapsed_s so it reaches min_sample_s; 0 = none.

    The rate comes from the sample itself (stalls included, unlike a calibration block that
    happened to run clean); the estimate aims SAMPLE_TARGET_MARGIN past the missing time, and
    the sample never grows past max_calls.
    """
    if elapsed_s >= min_sample_s or calls >= max_calls:
        return 0
    estimate = math.ceil(calls * (min_sample_s - elapsed_s) / max(elapsed_s, 1e-9) * SAMPLE_TARGET_MARGIN)
    return max(1, min(max_calls - calls, estimate))


@dataclass(frozen=True)
class Block:
    """One timed block on this rank: its duration, per-call latencies, its own clock as it arrived at
    each call (the sample's start only, on GPU) and its seconds inside the calls."""

    total_s: float
    per_call_s: list[float]
    arrivals_ns: list[float]
    in_op_s: float
    gaps_ns: list[float]  # per call, the rank's own time outside the ops before it (none on GPU)


def _nothing(index: int) -> None:
    """The arrival stamp of a clock that takes none (the GPU's), where a pause needs the loop's shape."""


class PointRunner:
    """Times one bound op (a zero-argument callable) under a TimingPlan on every rank."""

    def __init__(self, ctx: dist.DistContext, plan: TimingPlan, progress: Callable[[], None] = lambda: None,
                 clock: type | None = None, hosts: list[str] | None = None,
                 pause: Callable[[], None] | None = None):
        """progress() is called as each step starts (the deadline's renewal), never inside a sample.
        clock: a CpuClock subclass with another time source, for tests of the timing logic.
        hosts: each of the context's ranks' host name (ranks on one host share a clock); None: every
        rank's clock is aligned on its own. pause: called before every timed op (a planted late
        arrival, ranks/planted.py); None in every normal run, whose loop then holds no call for it."""
        self.ctx = ctx
        self.plan = plan
        self._progress = progress
        self._clock = clock or (CudaClock if ctx.on_gpu else CpuClock)
        self._hosts = hosts or [str(rank) for rank in range(ctx.world_size)]
        self._pause = pause
        self._events = None
        if ctx.on_gpu:
            import torch

            self._events = EventPool(lambda: torch.cuda.Event(enable_timing=True), torch.cuda.synchronize)

    def _timed(self, call: Callable[[], None], calls: int, per_op: bool = False,
               sync: Callable[[], None] | None = None) -> Block:
        self._progress()
        clock = self._clock(calls, self.plan.blocking, per_op, self._events)
        if sync is None:
            dist.barrier(self.ctx)
        else:
            sync()
        dist.synchronize(self.ctx)
        arrive, mark, pause = clock.arrive, clock.mark, self._pause
        clock.start()
        if pause is not None:
            arrive = arrive or _nothing
            for index in range(1, calls + 1):
                pause()
                arrive(index)
                call()
                mark(index)
        elif arrive is None:
            for index in range(1, calls + 1):
                call()
                mark(index)
        else:
            for index in range(1, calls + 1):
                arrive(index)
                call()
                mark(index)
        total_s, per_call_s = clock.finish()
        return Block(total_s, per_call_s, clock.arrivals_ns(), clock.in_op_s(), clock.gaps_ns())

    def time_block(self, call: Callable[[], None], calls: int, sync: Callable[[], None] | None = None) -> float:
        """This rank's seconds for `calls` back-to-back calls after a world barrier (or `sync`: the
        ranks the calls involve meet, and no others), not combined across ranks: the doctor times
        every node and pair of a round on its own."""
        return self._timed(call, calls, sync=sync).total_s

    def warm_up(self, call: Callable[[], None]) -> None:
        self._progress()
        for _ in range(self.plan.warmup):
            call()
        dist.synchronize(self.ctx)

    def align_clocks(self) -> arrivals.ClockAlignment:
        """Every rank's clock offset from rank 0's, from ALIGN_ROUNDS barrier exits (units/arrivals)."""
        self._progress()
        readings = []
        for _ in range(ALIGN_ROUNDS):
            dist.barrier(self.ctx)
            readings.append(float(time.perf_counter_ns()))
        return arrivals.align_clocks(dist.all_gather_floats(self.ctx, readings), self._hosts)

    def calibrate(self, call: Callable[[], None], ops_per_call: int) -> int:
        """Smallest op count whose sample lasts min_sample_s, agreed by all ranks (slowest wins).

        The rate comes from the fastest calibration block: on a shared host one stall inside a
        short block would otherwise make the op look slow and the timed sample too short.
        """
        target_s = self.plan.min_sample_s * CALIBRATION_FRACTION
        max_calls = max(1, MAX_AUTO_ITERS // ops_per_call)
        per_op_s = math.inf
        calls: int | None = 1
        first = True
        while calls is not None:
            elapsed_s = self._timed(call, calls).total_s
            self._progress()
            elapsed_s = dist.max_across_ranks(self.ctx, [elapsed_s])[0]
            per_op_s = min(per_op_s, elapsed_s / (calls * ops_per_call))
            calls = next_calibration_calls(
                calls, elapsed_s, target_s, max_calls, long_call_s=self.plan.min_sample_s / MIN_AUTO_ITERS, first=first
            )
            first = False
        return stats.iterations_for_sample(per_op_s, self.plan.min_sample_s, MIN_AUTO_ITERS, MAX_AUTO_ITERS)

    def measure(self, op: Callable[[], None]) -> Measurement:
        call, ops_per_call, empty_graph = self._maybe_graph(op)
        self.warm_up(call)
        alignment = self.align_clocks()
        iters = self.plan.iters if self.plan.iters is not None else self.calibrate(call, ops_per_call)
        calls = max(1, math.ceil(iters / ops_per_call))
        iters = calls * ops_per_call
        means_us, per_op_us, rank_totals = [], [], [0.0] * self.ctx.world_size
        in_op_us, arrival_us, gap_us = [], [], []
        shortest, timed_calls = math.inf, 0
        for trial in range(self.plan.trials):
            blocks = [self._timed(call, calls)]
            self._progress()
            per_rank = [values[0] for values in dist.all_gather_floats(self.ctx, [blocks[0].total_s])]
            if trial == 0 and self.plan.iters is None:
                calls, blocks, per_rank = self._fill_sample(call, calls, ops_per_call, blocks, per_rank)
                iters = calls * ops_per_call
            per_call_s = [s for block in blocks for s in block.per_call_s]
            combined_s, _ = stats.combine_ranks(per_rank, self.plan.agg)
            rank_totals = [a + b for a, b in zip(rank_totals, per_rank, strict=True)]
            timed_calls += calls
            means_us.append(combined_s / iters * 1e6)
            shortest = min(shortest, combined_s)
            if per_call_s and len(per_op_us) < MAX_KEPT_LATENCIES:
                per_op_us.extend(self._worst_per_op_us(per_call_s, ops_per_call)[: MAX_KEPT_LATENCIES - len(per_op_us)])
            inside, arrived, gaps = self._arrivals(blocks, iters, alignment.offsets_ns[self.ctx.rank])
            in_op_us.append(tuple(inside))
            arrival_us.append(tuple(arrived))
            gap_us.append(tuple(gaps))
        if not per_op_us:  # GPU without --blocking: one more sample, an event after every op
            block = self._timed(call, calls, per_op=True)
            cost_s = per_event_cost_s(block.total_s, calls, rank_totals[self.ctx.rank], timed_calls)
            per_op_us.extend(self._worst_per_op_us(without_event_cost(block.per_call_s, cost_s), ops_per_call))
        # the most time inside the op (calls to returns), not in the sample: a rank late between ops has
        # the longest sample and the least time inside the ops, where the others waited for it
        inside = [sum(trial[r] for trial in in_op_us) for r in range(self.ctx.world_size)]
        slowest = max(range(len(inside)), key=lambda r: inside[r])
        return Measurement(
            iters=iters,
            sample_means_us=tuple(means_us),
            per_op_us=tuple(per_op_us),
            max_time_rank=slowest,
            shortest_sample_s=shortest,
            timer_resolution_s=self._clock.resolution_s,
            empty_graph=empty_graph,
            in_op_us=tuple(in_op_us),
            arrival_us=tuple(arrival_us),
            clock_error_us=alignment.errors_us,
            gap_us=tuple(gap_us),
        )

    def _arrivals(self, blocks: list[Block], iters: int,
                  offset_ns: float) -> tuple[list[float], list[float], list[float | None]]:
        """Every rank's mean time inside an op, arrival offset and median time outside the ops (its gap),
        over one sample (its blocks), after the timing: per block one reduction gives the earliest
        arrival at each call, and one gather brings every rank's three figures."""
        lateness: list[float] = []
        for block in blocks:
            aligned = [stamp - offset_ns for stamp in block.arrivals_ns]
            earliest = [-value for value in dist.max_across_ranks(self.ctx, [-stamp for stamp in aligned])]
            lateness.extend(arrivals.lateness_us(aligned, earliest))
        self._progress()
        gaps = [gap for block in blocks for gap in block.gaps_ns]
        mine = [sum(block.in_op_s for block in blocks) / iters * 1e6, arrivals.arrival_offset_us(lateness) or 0.0,
                stats.median(gaps) / 1e3 if gaps else -1.0]
        gathered = dist.all_gather_floats(self.ctx, mine)
        return ([values[0] for values in gathered], [values[1] for values in gathered],
                [values[2] if values[2] >= 0 else None for values in gathered])

    def _fill_sample(self, call, calls: int, ops_per_call: int, blocks: list[Block],
                     per_rank: list[float]) -> tuple[int, list[Block], list[float]]:
        """Extend a first sample that fell short of min_sample_s by more timed ops (after a barrier,
        outside the clock), so no op is timed twice and none is wasted. Every rank decides alike
        from the gathered durations."""
        max_calls = max(1, MAX_AUTO_ITERS // ops_per_call)
        for _ in range(MAX_SAMPLE_EXTENSIONS):
            extra = calls_to_fill_sample(calls, max(per_rank), self.plan.min_sample_s, max_calls)
            if not extra:
                break
            more = self._timed(call, extra)
            self._progress()
            gathered = [values[0] for values in dist.all_gather_floats(self.ctx, [more.total_s])]
            per_rank = [a + b for a, b in zip(per_rank, gathered, strict=True)]
            blocks = [*blocks, more]
            calls += extra
        return calls, blocks, per_rank

    def _worst_per_op_us(self, per_call_s: list[float], ops_per_call: int) -> list[float]:
        self._progress()
        return [s / ops_per_call * 1e6 for s in dist.max_across_ranks(self.ctx, per_call_s)]

    def _maybe_graph(self, op: Callable[[], None]) -> tuple[Callable[[], None], int, bool]:
        """With --cuda-graph K, K ops are captured once and replayed as one call (nccl-tests -G).

        Also says whether the capture came out empty (then a replay launches no work to time).
        """
        if not (self.plan.cuda_graph and self.ctx.on_gpu):
            return op, 1, False
        import torch

        self._progress()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            op()  # capture needs the communicator already initialised for this op
        torch.cuda.current_stream().wait_stream(side)
        # No collective may still be in flight when capture starts: ProcessGroupNCCL's watchdog
        # thread queries its events, and under the default "global" capture mode such a query
        # from another thread invalidates the capture (pytorch/pytorch#104487, #105182).
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for _ in range(self.plan.cuda_graph):
                    op()
        return graph.replay, self.plan.cuda_graph, captured_nothing(caught)


class CallFloors:
    """The per-call floor of each op of one run, by a key its command chooses (the sweep: op and placement;
    the replay: op, ranks, dtype and peers): the median call of the op's smallest message, timed once per
    key through the same path as the rows (the rows' clock, --blocking and --cuda-graph) but FLOOR_CALLS
    calls after FLOOR_WARMUP, one sample, whatever the rows' iterations, trials and sample length."""

    def __init__(self, timing: TimingPlan):
        self.plan = dataclasses.replace(timing, warmup=FLOOR_WARMUP, iters=FLOOR_CALLS, min_sample_s=0.0, trials=1)
        self.floors_us: dict[Hashable, float | None] = {}

    def floor_us(self, key: Hashable, time_smallest: Callable[[TimingPlan], Measurement] | None,
                 own: Measurement | None = None) -> float | None:
        """The key's floor, timed once: kept from an earlier point; else time_smallest(plan), which times the
        smallest message under `plan` on every rank of the op's group; where the point is that message
        itself (time_smallest None), its own measurement `own` (None until it is measured)."""
        if key not in self.floors_us:
            measured = own if time_smallest is None else time_smallest(self.plan)
            if measured is not None:
                self.floors_us[key] = measured.median_call_us
        return self.floors_us.get(key)
