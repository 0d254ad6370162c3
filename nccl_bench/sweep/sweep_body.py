"""The sweep's body on the shared run life cycle (ranks/session.py): a peak, then every point.

Runs on every rank. Rank 0 alone writes results.csv and talks to the observer (the CLI's live
reporter); the other ranks get a silent observer. Every finished row is on disk before the next
point starts. The plan comes from sweep/plan.py, rows from sweep/rows.py, what the observer is told
from sweep/sweep_report.py, timing from ranks/runner.py. The doctor's counterpart is doctor/doctor_body.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from typing import Any, Callable

from nccl_bench.errors import RunFailedError, first_line
from nccl_bench.hardware.expected import System, run_algorithm, yardsticks
from nccl_bench.hardware.nvls import NVLS_OPS
from nccl_bench.ranks import check, dist, faults, run_facts, run_owner, session, split
from nccl_bench.ranks.collectives import CALLS, OpArgs, make_buffers
from nccl_bench.ranks.launch import worker_variant
from nccl_bench.ranks.nccl_trace import TuningTrace
from nccl_bench.ranks.planted import NoFaults, fault_seam
from nccl_bench.ranks.runner import CallFloors, Measurement, PointRunner, TimingPlan
from nccl_bench.results.csv_appender import RanksWriter, ResultsWriter
from nccl_bench.results.csv_reader import iter_rows
from nccl_bench.results.nccl_tuning import chosen
from nccl_bench.results.run_folder import read_meta
from nccl_bench.results.schema import STATUS_OK, STATUS_UNSUPPORTED, ResultRow, rank_lines
from nccl_bench.sweep import sweep_config as cfg
from nccl_bench.sweep.plan import Plan, Point, buffer_bytes, plan_run, size_option
from nccl_bench.sweep.references import expected_system, reference_peak
from nccl_bench.sweep.rows import RowContext, measured_row, unsupported_row
from nccl_bench.sweep.sweep_report import SilentObserver, SweepHeader, SweepObserver, SweepSummary
from nccl_bench.units import alltoallv, nccl_env
from nccl_bench.units.op_table import OPS, Collective, buffer_elems, smallest_size
from nccl_bench.units.sizes import format_size


def execute(config: cfg.SweepConfig, observer_factory: Callable[[int], SweepObserver],
            on_stuck: Callable[[RunFailedError], None] | None = None, plan: Plan | None = None) -> SweepSummary:
    """Run the sweep on this rank. observer_factory(rank) gives rank 0 its reporter; `plan` is
    plan_run's answer when the caller already has it (the CLI checks it against a baseline first);
    on_stuck: see session.execute."""
    import torch

    launch = session.require_launch()
    if plan is None:
        plan = plan_run(config, launch.world_size, torch.__version__, launch.local_world_size)
    request = session.RunRequest(
        command="sweep", backend=plan.backend, timeout_s=config.timeout_s, out=config.out,
        results_root=config.results_root, folder_label=config.ops, bytes_per_rank=plan.bytes_per_rank(config),
        size_option=size_option(config), config=cfg.as_dict(config),
        continues=(worker_variant(os.environ) or (1, 1))[0] > 1, control=bool(config.nccl_env),
    )
    body = _Sweep(config, plan, observer_factory)
    if config.nccl_trace and plan.backend == "nccl":  # before the process group: NCCL reads these once
        body.trace = TuningTrace.start(launch.rank)
    try:
        session.execute(request, body, on_stuck)
    finally:
        if body.trace is not None:
            body.trace.close()
    return body.summary


class _Sweep:
    """One rank's sweep: the RunBody of session.execute."""

    def __init__(self, config: cfg.SweepConfig, plan: Plan, observer_factory: Callable[[int], SweepObserver]):
        self.config, self.plan, self.observer_factory = config, plan, observer_factory
        self.summary = SweepSummary(run_dir=None, notes=list(plan.notes))
        self.observer: SweepObserver = SilentObserver()
        self.writer: ResultsWriter | None = None
        self.ranks_writer: RanksWriter | None = None  # ranks.csv: every rank's time in the op and arrival
        self.header: SweepHeader | None = None
        self.peak: dict[str, Any] | None = None
        self.planted: NoFaults = fault_seam(os.environ)
        self.system: System | None = None
        # --nccl-env: the settings these ranks were started with (each variant is a fresh set of ranks)
        self.variant = nccl_env.label(tuple((name, os.environ.get(name, "")) for name, _ in config.nccl_env))
        self.earlier_variants: list[dict[str, Any]] = []  # what meta.json said of the variants before this one
        self.trace: TuningTrace | None = None  # --nccl-trace on NCCL: this rank's tuning log
        # Known from set_up on: the run, the world's context and the one each op runs in (this rank's
        # --split group, or the world), the group's global ranks and name, all_to_allv's shares, the
        # facts every row carries.
        self.run: session.Run | None = None
        self.ctx: dist.DistContext | None = None
        self.op_ctx: dist.DistContext | None = None
        self.groups: list[split.Group] = []
        self.members: tuple[int, ...] = ()
        self.group_name: str | None = None
        self.shares: alltoallv.Shares | None = None
        self.row_context: RowContext | None = None
        # Known from measure on: the points an earlier attempt recorded, the buffers, the timing runner.
        self.done: set[tuple] = set()
        self.send_store: Any = None  # a torch tensor: torch is imported only where a run measures
        self.recv_store: Any = None
        self.runner: PointRunner | None = None
        self.floors: CallFloors | None = None  # each (op, placement)'s per-call floor

    @property
    def where(self) -> str:
        return self.summary.current_point or "the sweep"

    # -- the life cycle's steps -----------------------------------------------------------------
    def set_up(self, run: session.Run) -> None:
        self.run, self.ctx = run, run.ctx
        self.summary.run_dir = run.run_dir
        self.observer = self.observer_factory(self.ctx.rank)
        peak_gbps, peak_label = reference_peak(self.config, self.ctx, run.facts().nodes)
        self.peak = {"gbps": peak_gbps, "label": peak_label}
        self.summary.peak_gbps = peak_gbps
        self.op_ctx, self.members, nodes = self._groups(run)
        self.header = self._header(run, peak_label)
        # published figures describe a whole system: sub-group rows are not compared with them
        self.system = None if self.members else expected_system(self.ctx, run.facts().nodes)
        distribution = alltoallv.parse_distribution(self.config.alltoallv)
        self.shares = alltoallv.shares(distribution, self.op_ctx.world_size)  # the same on every rank
        self.row_context = RowContext(self.config, self.op_ctx.world_size, nodes, self.ctx.backend, peak_gbps,
                                      self.variant, self._nvswitch(), self._op_hosts())
        if run.run_dir is not None and run.request.continues:
            self.earlier_variants = list((read_meta(run.run_dir) or {}).get("variants", []))

    def meta(self) -> dict[str, Any]:
        meta = {"sizes": self.header.sizes, "iterations": self.header.iterations, "notes": list(self.header.notes),
                "peak": self.peak}
        return {**meta, **self._variants("running")} if self.config.nccl_env else meta

    def _variants(self, status: str) -> dict[str, Any]:
        """meta.json's record of every variant so far: its settings, the workers' NCCL environment, its ending."""
        this = {"variant": self.variant, "env": run_facts.recorded_env(os.environ), "timings": dict(self.run.timings),
                "status": status, "rows": len(self.summary.rows)}
        return {"variant": self.variant, "variants": [*self.earlier_variants, this]}

    def measure(self, run: session.Run) -> None:
        if run.run_dir is not None:
            self.writer = ResultsWriter(run.run_dir)
            self.ranks_writer = RanksWriter(run.run_dir)
        self.observer.started(self.header, len(self.plan.points) * max(1, len(self.groups)))  # rows per cycle
        self._resume()
        self._measure_all()

    def close(self, status: str) -> dict[str, Any]:
        self.summary.status = status
        if self.writer is not None:
            self.writer.close()
        if self.ranks_writer is not None:
            self.ranks_writer.close()
        if self.trace is not None and self.run.run_dir is not None:  # before meta.json records its path
            self.trace.keep(self.run.run_dir)
        measured = ((r.op, r.size_bytes, r.busbw_gbps) for r in self.summary.rows
                    if r.status == STATUS_OK and r.busbw_gbps is not None)
        # NVLS and ring figures do not mix: rings when the trace or the environment says so
        algorithm = run_algorithm(os.environ, (r.algo for r in self.summary.rows if r.op in NVLS_OPS))
        found = yardsticks(self.system, measured, algorithm=algorithm)
        self.summary.expected = [y.sentence for y in found]
        ending = {"rows": len(self.summary.rows), "wrong_total": self.summary.wrong_total}
        if self.config.nccl_env:
            ending.update(self._variants(status))
            ending["rows"] = sum(variant["rows"] for variant in ending["variants"])
        return {**ending, "expected": [y.as_meta() for y in found]} if found else ending

    def finished(self, status: str) -> None:
        self.observer.finished(self.summary)

    # -- set-up ---------------------------------------------------------------------------------
    def _groups(self, run: session.Run) -> tuple[dist.DistContext, tuple[int, ...], int]:
        """The context each op runs in (this rank's --split group, made once, or the world), the
        group's global ranks, and how many hosts it spans."""
        self.groups = []
        if self.config.split is None:
            return self.ctx, (), run.facts().nodes
        self.groups = split.groups(self.config.split, run.hostnames)
        planned = self.plan.group_size
        try:
            split.check_sizes(self.groups, planned, self.config.split)
        except ValueError as exc:  # the layout the hosts gave, named after the option that asked for groups
            raise RunFailedError(f"{cfg.option_name('split')} {exc}") from None
        started = time.perf_counter()
        made = dist.make_groups(self.ctx, [group.ranks for group in self.groups])
        run.time_set_up("split_s", time.perf_counter() - started)
        [mine] = [group for group in self.groups if self.ctx.rank in group.ranks]
        self.group_name = mine.name
        return made[mine.ranks], mine.ranks, len({run.hostnames[rank] for rank in mine.ranks})

    def _op_hosts(self) -> tuple[str, ...]:
        """The host of each of the op's ranks, in its group's order (ranks on one host share a clock)."""
        return tuple(self.run.hostnames[rank] for rank in (self.members or range(self.ctx.world_size)))

    def _nvswitch(self) -> bool | None:
        """Rank 0 on GPUs, the whole world: whether the GPUs sit behind an NVSwitch (a busbw above the
        links' peak is then NVLS's, hardware/nvls.py); None elsewhere (only rank 0's rows are recorded)."""
        if self.ctx.rank != 0 or not self.ctx.on_gpu or self.members:
            return None
        from nccl_bench.hardware.nvls import probe_nvswitch

        return probe_nvswitch()

    def _header(self, run: session.Run, peak_label: str | None) -> SweepHeader:
        config, on_gpu = self.config, self.ctx.on_gpu
        requested = cfg.resolve_sizes(config, on_gpu)
        host_default = config.sizes is None and config.min_bytes is None and config.max_bytes is None
        iterations = (
            f"{config.iters} per sample" if config.iters is not None
            else f"auto (calibrated for samples of {cfg.min_sample_ms(config, on_gpu):g} ms; "
                 "the end says how long they were)"
        )
        element_bytes = cfg.DTYPE_BYTES[config.dtype]
        planned = tuple((p.op, p.size_bytes, OPS[p.op].count(p.size_bytes // element_bytes,
                                                                  self.op_ctx.world_size))
                        for p in self.plan.points)
        notes = tuple(self.summary.notes)
        order = worker_variant(os.environ)
        if self.variant:
            which = f" {order[0]} of {order[1]}" if order else ""
            notes += (f"{cfg.option_name('nccl_env')} variant{which}: {self.variant} (fresh ranks for each)",)
        if self.groups:
            listed = "; ".join(f"{group.name}: ranks {split.ranks_text(group.ranks)}" for group in self.groups)
            notes += (f"{cfg.option_name('split')} {config.split}: {len(self.groups)} groups of "
                      f"{self.op_ctx.world_size} ranks measure at once ({listed})",)
        return SweepHeader(
            run=run.facts(),
            sizes=cfg.describe_sizes(requested) + (" (host default)" if host_default else "")
            + ", each rounded down to whole elements (x ranks for split ops)",
            iterations=iterations, warmup=config.warmup, trials=config.trials, dtype=config.dtype,
            reduce_op=config.reduce_op, agg=config.agg, peak=peak_label,
            notes=notes, planned=planned,
            repeats=(("group",) if self.groups else ()) + (("cycle",) if config.cycles != 1 else ())
            + (("variant",) if self.variant else ()) + (("algo", "proto") if self.trace is not None else ()),
            cycles=config.cycles, variant=self.variant,
        )

    # -- measuring ------------------------------------------------------------------------------
    def _resume(self) -> None:
        """A restarted attempt of an elastic job (torchrun --max-restarts) goes on after the points its
        earlier attempts recorded: their rows are kept as they are (counted, shown, never measured again),
        so results.csv ends with one row per point. The plan is the same in every attempt (the same
        command line and world); rank 0 reads the rows, every rank learns which points they cover."""
        self.done = set()
        if run_owner.attempt(os.environ) == 0:
            return
        self.run.renew("reading the rows of the earlier attempt")
        kept = list(iter_rows(self.run.run_dir, cfg.option_name("out"))) if self.run.run_dir is not None else None
        kept = dist.gather_objects(self.ctx, kept)[0]
        self.run.disarm()
        for row in kept:
            self.done.add(_point_key(row.cycle, row.op, row.size_bytes, row.placement))
            self.summary.rows.append(row)
            self.observer.row_done(row)

    def _measure_all(self) -> None:
        import torch

        config, ctx = self.config, self.op_ctx
        dtype = getattr(torch, config.dtype)
        element_bytes = cfg.DTYPE_BYTES[config.dtype]
        send_bytes, recv_bytes = buffer_bytes(list(self.plan.points), element_bytes)
        self.send_store = torch.zeros(max(send_bytes // element_bytes, 1), dtype=dtype, device=ctx.device)
        self.recv_store = torch.zeros(max(recv_bytes // element_bytes, 1), dtype=dtype, device=ctx.device)
        timing = TimingPlan(
            warmup=config.warmup, iters=config.iters, min_sample_s=cfg.min_sample_ms(config, ctx.on_gpu) / 1e3,
            trials=config.trials, agg=config.agg, blocking=config.blocking, cuda_graph=config.cuda_graph,
        )
        self.runner = PointRunner(ctx, timing, progress=self.run.renew, hosts=list(self._op_hosts()),
                                  pause=self.planted.pause(self.ctx.rank))
        self.floors = CallFloors(timing)
        unsupported: set[tuple[str, str]] = set()
        cycles = config.cycles
        if cycles == 1:  # a plain sweep: rows without a cycle
            self._measure_cycle(None, unsupported)
            return
        for cycle in itertools.count(1) if cycles == 0 else range(1, cycles + 1):
            self.observer.cycle_started(cycle, cycles)
            self._measure_cycle(cycle, unsupported)

    def _measure_cycle(self, cycle: int | None, unsupported: set[tuple[str, str]]) -> None:
        """Every point once; an op a backend cannot run is skipped in later cycles."""
        ctx = self.ctx  # faults are planted by world rank
        for index, point in enumerate(self.plan.points):
            if (point.op, point.placement) in unsupported:
                continue
            if _point_key(cycle, point.op, point.size_bytes, point.placement) in self.done:
                if any(row.status == STATUS_UNSUPPORTED and (row.op, row.placement) == (point.op, point.placement)
                       for row in self.summary.rows):
                    unsupported.add((point.op, point.placement))
                continue
            self.summary.current_point = f"{point.op} at {format_size(point.size_bytes)} ({point.placement})" + (
                "" if cycle is None else f" in cycle {cycle}")
            self.run.renew(self.summary.current_point, at=(point.op, point.size_bytes, self.group_name))
            self.planted.point_starts(ctx.rank, index)
            row, timings = self._point(point)
            rows = self._group_rows(dataclasses.replace(row, cycle=cycle), timings)
            if any(row.status == STATUS_UNSUPPORTED for row, _ in rows):
                unsupported.add((point.op, point.placement))
            self.run.disarm()
            self.summary.current_point = None
            for row, lines in rows:
                record_row(row, self.summary, self.writer, self.observer, lines, self.ranks_writer)

    def _group_rows(self, row: ResultRow, timings: Measurement | None) -> list[tuple[ResultRow, list[list]]]:
        """Every group's row of a point and its ranks.csv lines, on every rank (rank 0 records them); the
        world's own without --split. Ranks are world ranks in both."""
        if not self.groups:
            return [(row, self._rank_lines(row, timings, tuple(range(self.ctx.world_size))))]
        leader = self.op_ctx.rank == 0
        world = self.members
        mine = None
        if leader:
            row = dataclasses.replace(
                row, group=self.group_name,
                max_time_rank=None if row.max_time_rank is None else world[row.max_time_rank],
                late_rank=None if row.late_rank is None else world[row.late_rank])
            mine = (row, self._rank_lines(row, timings, world))
        gathered = dist.gather_objects(self.ctx, mine)
        return [gathered[group.ranks[0]] for group in self.groups]

    def _rank_lines(self, row: ResultRow, timings: Measurement | None, ranks: tuple[int, ...]) -> list[list]:
        """ranks.csv's lines of a measured point (none for a skipped one), on the rank that records them."""
        if timings is None or not timings.arrival_us or (self.ctx.rank != 0 and self.op_ctx.rank != 0):
            return []
        return rank_lines(row, ranks, timings.in_op_us, timings.arrival_us, timings.clock_error_us,
                          timings.gap_us)

    def _point(self, point: Point) -> tuple[ResultRow, Measurement | None]:
        config, ctx = self.config, self.op_ctx
        collective = OPS[point.op]
        buffers = make_buffers(collective, point.placement, self.send_store, self.recv_store, point.send_elems,
                               point.recv_elems, ctx.rank, ctx.world_size)
        args = OpArgs(ctx.rank, ctx.world_size, config.root,
                      _reduce_op(config.reduce_op) if collective.reduces else None,
                      self.shares if collective.uneven else None, ctx.group, self.members)
        reason = self._why_unsupported(collective, buffers, args)
        if reason is not None:
            return unsupported_row(self.row_context, point, collective, reason), None
        run_once = CALLS[point.op](buffers, args)
        self._floor_us(point, collective, args)
        if self.trace is not None:
            self.trace.mark()
        measurement = self.runner.measure(run_once)
        self.run.renew()
        floor_us = self._floor_us(point, collective, args, measurement)
        # what NCCL logged while timing, read before the check's own op
        element_bytes = cfg.DTYPE_BYTES[config.dtype]
        logged = collective.count(point.size_bytes // element_bytes, ctx.world_size) * element_bytes  # NCCL's count
        algo, proto = (chosen(self.trace.lines_since_mark(), point.op, logged) if self.trace else None) or ("", "")
        wrong = self._check(collective, buffers, args, run_once) if config.check and collective.factor else None
        row = measured_row(self.row_context, point, collective, measurement, wrong, floor_us)
        return (dataclasses.replace(row, algo=algo, proto=proto) if algo else row), measurement

    def _floor_us(self, point: Point, collective: Collective, args: OpArgs,
                  own: Measurement | None = None) -> float | None:
        """The median call of the per-call floor of the point's op and placement in this run
        (ranks/runner.CallFloors): timed once, by every rank of the op's group, before the op's first point;
        where that point is the smallest message, its own measurement (`own`, None until it is measured).
        None for an op without bandwidth (barrier)."""
        if collective.factor is None:
            return None
        ctx, element_bytes = self.op_ctx, cfg.DTYPE_BYTES[self.config.dtype]
        smallest = smallest_size(collective, element_bytes, ctx.world_size)

        def time_smallest(plan: TimingPlan) -> Measurement:
            send, recv = buffer_elems(collective, smallest, element_bytes, ctx.world_size)
            buffers = make_buffers(collective, point.placement, self.send_store, self.recv_store, send, recv,
                                   ctx.rank, ctx.world_size)
            timed = PointRunner(ctx, plan, progress=self.run.renew, hosts=list(self._op_hosts()))
            return timed.measure(CALLS[point.op](buffers, args))

        floor_us = self.floors.floor_us((point.op, point.placement),
                                        None if point.size_bytes == smallest else time_smallest, own)
        self.run.renew()
        return floor_us

    def _why_unsupported(self, collective: Collective, buffers, args) -> str | None:
        """Run the op once; if any rank cannot, every rank learns it and the op is skipped, not fatal."""
        ctx = self.op_ctx
        if ctx.world_size < collective.min_world_size:
            return f"needs at least {collective.min_world_size} ranks"
        try:
            CALLS[collective.name](buffers, args)()
            local_error = None
        except (RuntimeError, NotImplementedError, ValueError, TypeError) as exc:
            local_error = first_line(exc)
        failed = dist.max_across_ranks(ctx, [1.0 if local_error else 0.0])[0]
        if failed:
            return local_error or f"not supported by {ctx.backend} on another rank"
        return None

    def _check(self, collective: Collective, buffers, args: OpArgs, run_once) -> int:
        config, ctx = self.config, self.op_ctx
        buffers.recv.fill_(check.SENTINEL)
        check.fill_input(buffers.send, ctx.rank, config.reduce_op)
        run_once()
        dist.synchronize(ctx)
        segments = collective.segments(args.rank, args.world_size, args.root, buffers.recv.numel(), args.shares)
        holder = config.root if collective.rooted else 0
        self.planted.output_checked(buffers.recv, segments[0].start if segments else None, ctx.rank, holder)
        wrong = check.count_wrong(buffers.recv, segments, ctx.world_size, config.reduce_op)
        return dist.sum_across_ranks(ctx, wrong)


def _point_key(cycle: int | None, op: str, size_bytes: int, placement: str) -> tuple:
    """A point of the plan in one cycle, as its rows in results.csv name it (--split: one per group)."""
    return cycle, op, size_bytes, placement


def record_row(row: ResultRow, summary: SweepSummary, writer: ResultsWriter | None, observer: SweepObserver,
               rank_lines: list[list] | None = None, ranks_writer: RanksWriter | None = None) -> None:
    """The row lands whole, in the CSV, the summary and the table, before a signal can stop the sweep;
    its ranks' timings (ranks.csv) just before it, so a row in results.csv always has them."""
    with faults.signals_held():
        if ranks_writer is not None and rank_lines:
            ranks_writer.append_lines(rank_lines)
        if writer is not None:  # first: a row that cannot be written is not counted as kept
            writer.append(row)
        summary.rows.append(row)
        observer.row_done(row)


def _reduce_op(name: str):
    import torch.distributed as dist_module

    ops = dist_module.ReduceOp
    return {"sum": ops.SUM, "prod": ops.PRODUCT, "min": ops.MIN, "max": ops.MAX, "avg": ops.AVG}[name]
