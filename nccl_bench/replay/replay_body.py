"""The replay's body on the shared run life cycle (ranks/session.py), on every rank: the job's
collectives, one point each (replay/replay_plan.py), timed as the sweep times a point.

Each point runs on the ranks that stand in for its process group, in a process group made once per
distinct set of ranks (every rank makes every group, as torch requires); the other ranks sit it out.
Timing is ranks/runner.py's, as the sweep's: warmup, calibrated iterations, samples after a barrier of
the group, the slowest rank's time, with --cuda-graph N calls captured in a CUDA graph (timing_plan) and then
also call by call through torch's launch path (launch_path_plan: kernel time beside the launch path's); and
as the sweep's rows, a row whose median call sits at its per-call floor (the same op's smallest message on
the same ranks, or the smallest exchange between the same peers, timed once per run through the same path:
ranks/runner.CallFloors) is flagged call_bound. The group's first rank hands its row and floor to rank 0,
which alone writes results.csv (every row on disk before the next point starts) and lists the floors in
meta.json. The sweep's counterpart is sweep/sweep_body.py.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from nccl_bench.errors import OptionError, RunFailedError, first_line
from nccl_bench.ranks import dist, faults, session
from nccl_bench.ranks.collectives import CALLS, Buffers, OpArgs, bind_exchange
from nccl_bench.ranks.preflight import chosen_backend
from nccl_bench.ranks.runner import CallFloors, Measurement, PointRunner, TimingPlan
from nccl_bench.ranks.split import ranks_text
from nccl_bench.replay.replay_config import ReplayConfig
from nccl_bench.replay.replay_plan import MEMORY_REMEDY, ReplayPlan, ReplayPoint, group_label, plans_disagree
from nccl_bench.results.csv_appender import ResultsWriter
from nccl_bench.results.schema import STATUS_OK, STATUS_UNSUPPORTED, ResultRow
from nccl_bench.sweep.rows import bandwidths, timing_flags
from nccl_bench.units import stats
from nccl_bench.units.op_table import OPS, PLACEMENT_IN, Collective, smallest_size
from nccl_bench.units.sizes import format_size

# How often a rank outside a point's group looks for the group's next step: well inside any --timeout
# (1 s at the least), and a few store reads a second.
IDLE_POLL_S = 0.05
# A trace does not say which reduction a job used, nor a root: sum (what gradients use) and rank 0.
REDUCE_OP = "sum"
ROOT = 0


@dataclass
class ReplaySummary:
    """What rank 0 has of the run: its folder and every row written."""

    run_dir: Any = None
    rows: list[ResultRow] = field(default_factory=list)
    status: str = "running"


def execute(config: ReplayConfig, plan: ReplayPlan, uncaptured: Mapping[str, str] | None = None,
            on_stuck: Callable[[RunFailedError], None] | None = None) -> ReplaySummary:
    """Replay `plan` on this rank through the shared life cycle; the ops in `uncaptured` (--cuda-graph cannot
    capture them here: replay_plan.uncaptured_ops) are rows marked unsupported with why; on_stuck: see
    session.execute."""
    session.require_launch()
    request = session.RunRequest(
        command="replay", backend=chosen_backend(config.backend), timeout_s=config.timeout_s, out=config.out,
        results_root=config.results_root, folder_label=("replay",), bytes_per_rank=plan.bytes_per_rank,
        size_option="traces", size_remedy=MEMORY_REMEDY, config=config.as_meta(),
    )
    body = _Replay(config, plan, uncaptured or {})
    session.execute(request, body, on_stuck)
    return body.summary


class _Replay:
    """One rank's replay: the RunBody of session.execute."""

    def __init__(self, config: ReplayConfig, plan: ReplayPlan, uncaptured: Mapping[str, str]):
        self.config, self.plan, self.uncaptured = config, plan, uncaptured
        self.summary = ReplaySummary()
        self.where = "the replay"
        self.run: session.Run | None = None
        self.contexts: dict[tuple[int, ...], dist.DistContext] = {}  # this rank's groups, by their ranks
        self.writer: ResultsWriter | None = None
        self.beats: _Heartbeat | None = None
        self.floors: CallFloors | None = None  # each (op, ranks, dtype, peers)'s per-call floor, on its group
        self.floors_seen: dict[tuple, dict[str, Any]] = {}  # rank 0: every floor of the run, for meta.json

    # -- the life cycle's steps -----------------------------------------------------------------
    def set_up(self, run: session.Run) -> None:
        self.run = run
        self.summary.run_dir = run.run_dir
        ctx = run.ctx
        plans = dist.gather_objects(ctx, (self.plan.digest, self.plan.source, os.urandom(8).hex()))
        problem = plans_disagree([(digest, source) for digest, source, _ in plans])
        if problem is not None:  # seen alike by every rank, before any group exists: refused on every rank
            raise OptionError("traces", problem)
        self.beats = _Heartbeat(ctx.store, plans[0][2])
        world = tuple(range(ctx.world_size))
        self.contexts = dist.make_groups(ctx, [ranks for ranks in self.plan.groups if ranks != world])
        if world in self.plan.groups:  # the world's points run in the default group itself
            self.contexts[world] = ctx

    def meta(self) -> dict[str, Any]:
        return {"source": self.plan.source, "points": len(self.plan.points), "notes": list(self.plan.left_out)}

    def measure(self, run: session.Run) -> None:
        if run.run_dir is not None:
            self.writer = ResultsWriter(run.run_dir)
        self.floors = CallFloors(timing_plan(self.config, run.ctx.on_gpu))
        for index, point in enumerate(self.plan.points):
            self.where = f"{point.op} at {format_size(point.size_bytes)} on ranks {ranks_text(point.ranks)}"
            run.renew(self.where, at=(point.op, point.size_bytes, f"ranks {ranks_text(point.ranks)}"))
            leader = run.ctx.rank == point.ranks[0]
            if run.ctx.rank in point.ranks:
                mine = self._point(point, functools.partial(self.beats.beat, index) if leader else _no_beat)
                if leader:
                    self.beats.done(index)
            else:  # sits the point out, each of the group's steps renewing its deadline
                mine = None
                self.beats.wait(index, lambda: run.renew(self.where))
            row, floor_us = dist.gather_objects(run.ctx, mine)[point.ranks[0]]  # its group's first rank's
            run.disarm()
            if run.ctx.rank == 0:
                self._record(row, point, floor_us)
        self.where = "the replay"

    def close(self, status: str) -> dict[str, Any]:
        self.summary.status = status
        if self.writer is not None:
            self.writer.close()
        return {"rows": len(self.summary.rows), "call_floors": list(self.floors_seen.values())}

    def finished(self, status: str) -> None:
        pass

    # -- measuring ------------------------------------------------------------------------------
    def _record(self, row: ResultRow, point: ReplayPoint, floor_us: float | None) -> None:
        """The row lands whole, in the CSV and the summary, before a signal can stop the replay; its floor
        joins meta.json's list (once per floor)."""
        with faults.signals_held():
            if self.writer is not None:
                self.writer.append(row)
            self.summary.rows.append(row)
        if floor_us is not None:
            smallest = smallest_size(OPS[point.op], point.element_bytes, point.group_size)
            self.floors_seen.setdefault(_floor_key(point), {
                "op": point.op, "dtype": point.dtype, "group": row.group, "size_bytes": smallest,
                "median_call_us": floor_us})

    def _point(self, point: ReplayPoint, beat: Callable[[], None]) -> tuple[ResultRow, float | None] | None:
        """Measure one point on this rank's group; its first rank returns the row and the op's per-call floor.
        beat() as each step of the timing starts, the floor's too (the ranks outside the group renew their
        deadlines by it)."""
        ctx = self.contexts[point.ranks]
        collective = OPS[point.op]
        placement = collective.placements[0]
        leader = ctx.rank == 0
        reason = self.uncaptured.get(point.op)  # known alike on every rank: nothing is run for it
        if reason is None:
            run_once = self._bound(point, ctx)
            reason = _why_unsupported(ctx, run_once)
        if reason is not None:
            return (self._row(point, collective, placement, None, reason), None) if leader else None

        def progress() -> None:
            self.run.renew()
            beat()

        self._floor_us(point, ctx, progress)
        measurement = PointRunner(ctx, timing_plan(self.config, ctx.on_gpu), progress=progress).measure(run_once)
        self.run.renew()
        floor_us = self._floor_us(point, ctx, progress, measurement)
        launch_path = launch_path_plan(self.config, ctx.on_gpu)
        launch_path_us = None
        if launch_path is not None:
            launch_path_us = PointRunner(ctx, launch_path, progress=progress).measure(run_once).time_us
            self.run.renew()
        row = self._row(point, collective, placement, measurement, None, floor_us, launch_path_us)
        return (row, floor_us) if leader else None

    def _bound(self, point: ReplayPoint, ctx: dist.DistContext) -> Callable[[], None]:
        """The point's op bound to buffers of its size: its exchange between its peers, else the op on its group."""
        import torch

        collective = OPS[point.op]
        send_elems, recv_elems = point.buffer_elems()
        dtype = getattr(torch, point.dtype)
        recv = torch.zeros(max(recv_elems, 1), dtype=dtype, device=ctx.device)[:recv_elems]
        send = recv if collective.placements[0] == PLACEMENT_IN else torch.zeros(
            max(send_elems, 1), dtype=dtype, device=ctx.device)[:send_elems]
        args = OpArgs(ctx.rank, ctx.world_size, ROOT, _sum() if collective.reduces else None, None, ctx.group,
                      () if ctx is self.run.ctx else point.ranks)
        buffers = Buffers(send=send, recv=recv)
        return bind_exchange(buffers, args, point.transfers) if point.transfers else CALLS[point.op](buffers, args)

    def _floor_us(self, point: ReplayPoint, ctx: dist.DistContext, progress: Callable[[], None],
                  own: Measurement | None = None) -> float | None:
        """The median call of the point's per-call floor in this run (ranks/runner.CallFloors): the same op's
        smallest message (one element per rank) on the same ranks in the same dtype, an exchange's between
        the same peers, timed once by the group's ranks before the first such point; where the point is that
        message, its own measurement (`own`, None until it is measured). None for an op without bandwidth."""
        collective = OPS[point.op]
        if collective.factor is None:
            return None
        smallest = dataclasses.replace(point, size_bytes=smallest_size(collective, point.element_bytes,
                                                                        point.group_size))

        def time_smallest(plan: TimingPlan) -> Measurement:
            return PointRunner(ctx, plan, progress=progress).measure(self._bound(smallest, ctx))

        floor_us = self.floors.floor_us(_floor_key(point),
                                        None if point.size_bytes == smallest.size_bytes else time_smallest, own)
        self.run.renew()
        return floor_us

    def _row(self, point: ReplayPoint, collective: Collective, placement: str, measurement: Measurement | None,
             unsupported: str | None, floor_us: float | None = None, launch_path_us: float | None = None
             ) -> ResultRow:
        """The point's row, in the sweep's columns and numbers, with the trace as its source; call_bound
        where its median call sits at the per-call floor `floor_us` (sweep/rows.CALL_BOUND_FACTOR);
        launch_path_us: with --cuda-graph, its time through torch's launch path (launch_path_plan)."""
        group_size = point.group_size
        factor = collective.factor(group_size) if collective.factor else None
        hosts = {self.run.hostnames[rank] for rank in point.ranks}
        common = dict(
            op=point.op, placement=placement, size_bytes=point.size_bytes,
            count=collective.count(point.size_bytes // point.element_bytes, group_size), dtype=point.dtype,
            redop=REDUCE_OP if collective.reduces else "none", root=ROOT if collective.rooted else -1,
            world_size=group_size, nodes=len(hosts), backend=self.run.request.backend, agg="max",
            busbw_factor=factor, source=self.plan.source,
            group=group_label(point.ranks, self.run.launch.world_size),
        )
        if measurement is None:
            return ResultRow(**common, iters=0, trials=0, time_us=None, time_min_us=None, time_max_us=None,
                             p50_us=None, p99_us=None, algbw_gbps=None, busbw_gbps=None, wrong=None,
                             max_time_rank=None, status=STATUS_UNSUPPORTED, flags=unsupported.replace(";", ","))
        flags = timing_flags(measurement, factor, group_size, placement, floor_us)
        algbw, busbw = bandwidths(point.size_bytes, measurement.time_us, factor, flags)
        return ResultRow(
            **common, iters=measurement.iters, trials=len(measurement.sample_means_us),
            time_us=measurement.time_us, time_min_us=min(measurement.sample_means_us),
            time_max_us=max(measurement.sample_means_us), p50_us=stats.percentile(measurement.per_op_us, 50),
            p95_us=stats.percentile(measurement.per_op_us, 95), p99_us=stats.percentile(measurement.per_op_us, 99),
            algbw_gbps=algbw, busbw_gbps=busbw, wrong=None,
            max_time_rank=point.ranks[measurement.max_time_rank], status=STATUS_OK, flags=";".join(flags),
            launch_path_us=launch_path_us,
        )


def timing_plan(config: ReplayConfig, on_gpu: bool) -> TimingPlan:
    """How every point and its per-call floor are timed, as the sweep times a point: the slowest rank's
    time, and with --cuda-graph its calls captured in CUDA graphs (ranks/runner.py; the GPU's only)."""
    return TimingPlan(warmup=config.warmup, iters=config.iters, min_sample_s=config.sample_ms(on_gpu) / 1e3,
                      trials=config.trials, agg="max", cuda_graph=config.cuda_graph)


def launch_path_plan(config: ReplayConfig, on_gpu: bool) -> TimingPlan | None:
    """With --cuda-graph on a GPU, how each point is also timed through torch's launch path: the same runner
    and plan without the graph, call by call as a replay without --cuda-graph times it, so that its row holds
    the kernel time (time_us) and the time through torch's launch path (launch_path_us) side by side. None:
    the point's one timing already is the launch path's."""
    if not (config.cuda_graph and on_gpu):
        return None
    return dataclasses.replace(timing_plan(config, on_gpu), cuda_graph=0)


def _floor_key(point: ReplayPoint) -> tuple:
    """Points that share a per-call floor: one op on the same ranks in one dtype (its placement is the op's
    first), an exchange between the same peers."""
    return point.op, point.ranks, point.dtype, point.transfers


def _no_beat() -> None:
    """A group's other ranks: the first rank speaks for the group's steps."""


class _Heartbeat:
    """The steps of a point's group, told through the rendezvous store to the ranks outside it.

    A rank outside a point's group has nothing of its own to time, so one deadline step for the whole
    point would expire under a long point while nothing is stuck. The group's first rank counts each
    of its timing steps (each shorter than --timeout, as it is on the group's own ranks) and marks the
    point done; the others poll and renew their deadline at each new step. Keys carry the run's nonce
    (rank 0's), so a restarted attempt on the same store never reads an earlier one's.
    """

    def __init__(self, store: Any, nonce: str):
        self.store, self.prefix = store, f"nccl_bench/replay/{nonce}/"

    def beat(self, point: int) -> None:
        self.store.add(f"{self.prefix}{point}/steps", 1)

    def done(self, point: int) -> None:
        self.store.set(f"{self.prefix}{point}/done", "1")

    def wait(self, point: int, renew: Callable[[], None]) -> None:
        """Until the point's group is done; renew() at each new step of it."""
        steps_key, done_key, seen = f"{self.prefix}{point}/steps", f"{self.prefix}{point}/done", 0
        while not self.store.check([done_key]):
            steps = self.store.add(steps_key, 0)
            if steps != seen:
                seen = steps
                renew()
            time.sleep(IDLE_POLL_S)


def _why_unsupported(ctx: dist.DistContext, run_once) -> str | None:
    """Run the op once; if any rank of the group cannot, every rank learns it and the point is a row that says so."""
    try:
        run_once()
        local_error = None
    except (RuntimeError, NotImplementedError, ValueError, TypeError) as exc:
        local_error = first_line(exc)
    if dist.max_across_ranks(ctx, [1.0 if local_error else 0.0])[0]:
        return local_error or f"not supported by {ctx.backend} on another rank"
    return None


def _sum():
    import torch.distributed

    return torch.distributed.ReduceOp.SUM
