"""The doctor on every rank: intra-node all_reduce per host, then node pairs rail by rail, re-tests.

Hosts are told apart by hostname (as the sweep counts nodes); a host's ranks, in rank order, are
its rails 0, 1, ... Rail i of one node exchanges with rail i of the other, so every NIC works.
Every rank derives the same schedule and, from all-gathered times, the same verdicts, so the
re-tests need no extra coordination. Rank 0 alone writes the run folder and talks to the observer.

Timing: each measurement is `warmup` untimed calls, then `samples` samples of `iters` calls, each
sample after a world barrier so the pairs of a round run together. A pair's sample time is the
slower of its two ranks; doctor.csv reports the median sample / iters as the sweep does, and the
verdicts judge the fastest sample (best_busbw_gbps).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from nccl_bench.doctor import schedule, verdicts
from nccl_bench.doctor.config import ELEMENT_BYTES, DoctorConfig, resolve_size
from nccl_bench.errors import RunFailedError, UserInputError
from nccl_bench.ranks import dist, faults
from nccl_bench.ranks.runner import PointRunner, TimingPlan
from nccl_bench.results.store import CsvAppender, new_run_dir, prepare_run_dir, write_meta
from nccl_bench.units import bandwidth, stats
from nccl_bench.units.sizes import format_size

# Re-test passes: the first confirms the first lows (and, in quick mode, adds cross-checks against
# nodes that passed), the second confirms low cross-checks; the third is only a bound.
MAX_RETEST_PASSES = 3
# Up to this many pairs, each re-test runs alone: what slowed a pair in its first round (a pair
# beside it sharing switches or, on simulated hosts, CPUs) is then absent the second time. More
# low pairs than this (a congested fabric) are re-tested packed into rounds like the first pass.
SOLO_RETESTS = 32
DOCTOR_CSV = "doctor.csv"
DOCTOR_JSON = "doctor.json"
JSON_SCHEMA_VERSION = 1


def checked_backend(config: DoctorConfig) -> str:
    import torch

    backend = dist.choose_backend(config.backend, torch.cuda.is_available())
    dist.check_backend_built(backend)
    return backend


def preflight(config: DoctorConfig, local_ranks: int) -> None:
    """What a launcher-less run refuses before starting workers: the backend, host memory."""
    from nccl_bench.ranks.sweep import check_memory, host_available_bytes

    backend = checked_backend(config)
    if dist.device_kind(backend) == "cpu":
        check_memory(2 * resolve_size(config, False), local_ranks, host_available_bytes(), "host", "--size")


@dataclass(frozen=True)
class Node:
    host: str
    ranks: tuple[int, ...]  # rank of rail 0, rail 1, ...


@dataclass(frozen=True)
class DoctorHeader:
    backend: str
    launcher: str
    world_size: int
    nodes: tuple[Node, ...]
    versions: dict[str, str]
    size_bytes: int
    iters: int
    samples: int
    warmup: int
    phases: tuple[str, ...]
    mode: str  # full | quick
    rounds: int  # pair rounds planned before re-tests
    tolerance: float
    expect_gbps: float | None
    run_dir: Path | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DoctorRecord:
    """One measurement, one line of doctor.csv (the sweep's units: bytes, us, GB/s = 1e9 B/s)."""

    phase: str  # nodes | pairs
    attempt: int  # 1 = first, 2+ = re-test
    round: int  # pair round (0 for the nodes phase)
    hosts: str  # ';'-separated: one host (nodes) or two (pairs)
    rail: int | None  # pairs: local rank index on both nodes; None for the nodes phase
    ranks: str  # ';'-separated global ranks taking part
    size_bytes: int
    iters: int
    samples: int
    time_us: float  # median sample / iters: per all_reduce or per two-way exchange
    time_min_us: float
    time_max_us: float
    algbw_gbps: float
    busbw_factor: float
    busbw_gbps: float  # from time_us, as the sweep
    best_busbw_gbps: float  # from time_min_us: what the verdicts use
    schema_version: int = JSON_SCHEMA_VERSION


RECORD_COLUMNS = tuple(f.name for f in dataclasses.fields(DoctorRecord))


@dataclass
class DoctorReport:
    run_dir: Path | None
    header: DoctorHeader | None = None
    judgement: verdicts.Judgement | None = None
    records: list[DoctorRecord] = field(default_factory=list)
    status: str = "running"
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    heatmap_path: Path | None = None  # set by the reporter that drew it

    @property
    def verdict(self) -> str:
        return self.judgement.verdict if self.judgement is not None else "unknown"


class DoctorObserver(Protocol):
    def started(self, header: DoctorHeader) -> None: ...
    def pairs_planned(self, rounds: int, per_round_s: float) -> None: ...
    def rounds_added(self, rounds: int, what: list[str]) -> None: ...
    def round_done(self) -> None: ...
    def finished(self, report: DoctorReport) -> None: ...


class SilentObserver:
    def started(self, header: DoctorHeader) -> None:
        pass

    def pairs_planned(self, rounds: int, per_round_s: float) -> None:
        pass

    def rounds_added(self, rounds: int, what: list[str]) -> None:
        pass

    def round_done(self) -> None:
        pass

    def finished(self, report: DoctorReport) -> None:
        pass


def group_nodes(hostnames: list[str]) -> list[Node]:
    """Hosts in order of their first rank; each host's ranks in rank order are its rails."""
    found: dict[str, list[int]] = {}
    for rank, host in enumerate(hostnames):
        found.setdefault(host, []).append(rank)
    return [Node(host, tuple(ranks)) for host, ranks in found.items()]


def report_json(report: DoctorReport) -> dict[str, Any]:
    """doctor.json, schema_version 1 (README "Results on disk")."""
    judgement, header = report.judgement, report.header
    fleet = {
        name: None if stat is None else {"median_gbps": stat.median_gbps, "mad_gbps": stat.mad_gbps, "count": stat.count}
        for name, stat in (("pairs", judgement.pair_fleet), ("intra", judgement.intra_fleet))
    }
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "verdict": judgement.verdict,
        "nodes": [
            {"host": n.host, "ranks": list(n.ranks), "intra_busbw_gbps": n.intra_busbw_gbps,
             "pair_median_gbps": n.pair_median_gbps, "verdict": n.verdict}
            for n in judgement.nodes
        ],
        "pairs": [
            {"hosts": list(p.hosts), "rail": p.rail, "busbw_gbps": p.busbw_gbps, "verdict": p.verdict,
             "attempts_gbps": list(p.attempts)}
            for p in judgement.pairs
        ],
        "suspects": [
            {"kind": s.kind, "hosts": list(s.hosts), "rail": s.rail, "measured_gbps": s.measured_gbps,
             "fleet_median_gbps": s.fleet_median_gbps, "reason": s.reason}
            for s in judgement.suspects
        ],
        "wall_s": report.wall_s,
        "mode": header.mode,
        "size_bytes": header.size_bytes,
        "tolerance": header.tolerance,
        "expect_gbps": header.expect_gbps,
        "thresholds_gbps": {"pairs": judgement.pair_threshold_gbps, "intra": judgement.intra_threshold_gbps},
        "fleet": fleet,
        "notes": list(header.notes) + report.notes + judgement.notes,
    }


def write_report_json(report: DoctorReport, path: Path) -> None:
    import json

    Path(path).write_text(json.dumps(report_json(report), indent=2) + "\n", encoding="utf-8")


def execute(config: DoctorConfig, observer_factory: Callable[[int], DoctorObserver]) -> DoctorReport:
    """Run the doctor on this rank. observer_factory(rank) gives rank 0 its reporter."""
    from nccl_bench.ranks.sweep import check_memory, host_available_bytes

    launch = dist.detect_launch()
    if launch is None:
        raise UserInputError("launcher", "no rank layout found (run under torchrun, srun or mpirun, or use --workers)")
    backend = checked_backend(config)
    on_gpu = dist.device_kind(backend) == "cuda"
    size = resolve_size(config, on_gpu)
    if not on_gpu:
        check_memory(2 * size, launch.local_world_size, host_available_bytes(), "host", "--size")
    run_dir = None
    if launch.rank == 0:
        target = config.out if config.out is not None else new_run_dir(config.results_root, ["doctor"])
        run_dir = prepare_run_dir(target, "--out" if config.out is not None else "--results-root")
    report = DoctorReport(run_dir=run_dir)
    try:
        with faults.signals_raise_interrupted(), dist.process_group(launch, backend, config.timeout_s) as ctx:
            _Doctor(config, ctx, launch, size, report, observer_factory(ctx.rank)).run()
    except RuntimeError as exc:  # process-group set-up or the first exchange of host names
        raise RunFailedError(f"setting up the doctor failed on rank {launch.rank}: {dist.backend_error_text(exc)}") from exc
    return report


class _Doctor:
    """One rank's run: the state every phase shares (nodes, buffers, measurements so far)."""

    def __init__(self, config: DoctorConfig, ctx, launch, size: int, report: DoctorReport, observer):
        self.config, self.ctx, self.launch, self.size = config, ctx, launch, size
        self.report, self.observer = report, observer
        self.intra: dict[str, list[float]] = {}
        self.pairs: dict[verdicts.PairKey, list[float]] = {}
        self.writer: CsvAppender | None = None
        self.group = None  # this host's process group, for the intra-node all_reduce
        self.where = "the doctor"
        self.round_index = 0

    def run(self) -> None:
        started_wall = time.monotonic()
        hostnames = dist.gather_objects(self.ctx, dist.hostname())
        self.nodes = group_nodes(hostnames)
        self.header = self._header()
        self.report.header = self.header
        started = _dt.datetime.now(_dt.timezone.utc).isoformat()
        try:  # from the first meta.json on, the run ends with a final one whatever happens
            if self.ctx.rank == 0:
                write_meta(self.report.run_dir, self._meta(hostnames, "running", started))
                self.writer = CsvAppender(self.report.run_dir / DOCTOR_CSV, RECORD_COLUMNS)
            self.observer.started(self.header)
            self._measure()
            self.report.judgement = self._judge_with_retests()
            self.report.status = "complete"
        except (faults.Interrupted, Exception) as exc:
            faults.hold_signals()
            stop = faults.why_stopped(exc, self.ctx, self.config.timeout_s, self.where, hostnames)
            self.report.status = "interrupted" if isinstance(stop, faults.Interrupted) else "failed"
            if stop is exc:
                raise
            raise stop from (exc if not isinstance(exc, faults.Interrupted) else None)
        finally:
            faults.hold_signals()
            self.report.wall_s = time.monotonic() - started_wall
            if self.writer is not None:
                self.writer.close()
                if self.report.judgement is not None:
                    write_report_json(self.report, self.report.run_dir / DOCTOR_JSON)
                meta = self._meta(hostnames, self.report.status, started)
                meta["verdict"] = self.report.verdict
                meta["wall_s"] = self.report.wall_s
                write_meta(self.report.run_dir, meta)
            self.observer.finished(self.report)

    # -- set-up ---------------------------------------------------------------------------------
    def _header(self) -> DoctorHeader:
        import torch

        notes = []
        config = self.config
        if "nodes" in config.phases and all(len(n.ranks) < 2 for n in self.nodes):
            notes.append("nodes phase skipped: every node has one rank, so there is no intra-node all_reduce")
        elif "nodes" in config.phases:
            notes.extend(f"node {n.host} has one rank: no intra-node all_reduce" for n in self.nodes if len(n.ranks) < 2)
        if "pairs" in config.phases and len(self.nodes) < 2:
            notes.append("pairs phase skipped: one node, no pair of nodes to test")
        if len({len(n.ranks) for n in self.nodes}) > 1:
            notes.append("nodes have different rank counts: a pair uses min(ranks) rails")
        versions = {"torch": torch.__version__, "python": platform.python_version()}
        if self.ctx.on_gpu:
            versions["cuda"] = str(torch.version.cuda)
        return DoctorHeader(
            backend=self.ctx.backend, launcher=self.launch.launcher, world_size=self.ctx.world_size,
            nodes=tuple(self.nodes), versions=versions, size_bytes=self.size, iters=config.iters,
            samples=config.samples, warmup=config.warmup, phases=config.phases,
            mode="quick" if config.quick else "full", rounds=len(self._first_rounds()),
            tolerance=config.tolerance, expect_gbps=config.expect_gbps, run_dir=self.report.run_dir, notes=tuple(notes),
        )

    def _first_rounds(self) -> list[schedule.Round]:
        if "pairs" not in self.config.phases:
            return []
        if self.config.quick:
            return schedule.random_rounds(len(self.nodes), self.config.quick_rounds, self.config.seed)
        return schedule.circle_rounds(len(self.nodes))

    def _meta(self, hostnames: list[str], status: str, started: str) -> dict[str, Any]:
        config = {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self.config).items()}
        return {
            "tool": "nccl_bench",
            "command": "doctor",
            "schema_version": JSON_SCHEMA_VERSION,
            "status": status,
            "started_utc": started,
            "ended_utc": None if status == "running" else _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "command_line": list(getattr(sys, "orig_argv", sys.argv)),
            "backend": self.header.backend,
            "launcher": self.header.launcher,
            "world_size": self.header.world_size,
            "nodes": len(self.nodes),
            "hostnames": hostnames,
            "versions": self.header.versions,
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "config": config,
            "size_bytes": self.size,
            "notes": list(self.header.notes),
        }

    # -- measuring ------------------------------------------------------------------------------
    def _measure(self) -> None:
        import torch

        elems = self.size // ELEMENT_BYTES
        self.send = torch.zeros(elems, dtype=torch.float32, device=self.ctx.device)
        self.recv = torch.zeros(elems, dtype=torch.float32, device=self.ctx.device)
        self.runner = PointRunner(self.ctx, TimingPlan(
            warmup=self.config.warmup, iters=self.config.iters, min_sample_s=0.0, trials=self.config.samples, agg="max",
        ))
        self.my_node = next(n for n in self.nodes if self.ctx.rank in n.ranks)
        if "nodes" in self.config.phases and any(len(n.ranks) > 1 for n in self.nodes):
            self.group = self._node_group()
            self._intra_round(attempt=1, hosts=[n.host for n in self.nodes])
        rounds = self._first_rounds()
        if rounds:
            per_round_s = self._probe(rounds[0])
            self.observer.pairs_planned(len(rounds), per_round_s)
            for pairs in rounds:
                self._pair_round(pairs, attempt=1)

    def _node_group(self):
        """This host's ranks as a process group, made once.

        Every rank creates every host's group, in node order: NCCL splits a group from the world
        communicator, which all ranks must enter (torch's new_group docs), so a group made by its
        members alone would hang there. One group per host, once: N groups, not one per pair.
        """
        import torch.distributed as tdist

        mine = None
        for node in self.nodes:
            if len(node.ranks) > 1:
                group = tdist.new_group(list(node.ranks))
                if node is self.my_node:
                    mine = group
        return mine

    def _samples(self, call: Callable[[], None] | None) -> list[list[float]]:
        """Every rank's sample times (seconds); NaN for a rank that sat the measurement out."""
        idle = call is None
        call = call or (lambda: None)
        self.runner.warm_up(call)
        times = [self.runner.time_block(call, self.config.iters) for _ in range(self.config.samples)]
        return dist.all_gather_floats(self.ctx, [math.nan] * len(times) if idle else times)

    def _record(self, phase: str, attempt: int, hosts: tuple[str, ...], rail: int | None, ranks: tuple[int, ...],
                per_rank: list[list[float]], factor: float) -> float:
        """Slowest rank per sample; the record (median sample, as the sweep) lands in doctor.csv.

        Returns the busbw of the fastest sample, which the verdicts judge: noise from other jobs
        only ever slows a sample down, while a slow NIC or link is slow in every sample.
        """
        iters = self.config.iters
        per_sample = [max(per_rank[r][s] for r in ranks) / iters * 1e6 for s in range(self.config.samples)]
        time_us = stats.median(per_sample)
        algbw = bandwidth.algbw_gbps(self.size, time_us)
        best = bandwidth.busbw_gbps(bandwidth.algbw_gbps(self.size, min(per_sample)), factor)
        record = DoctorRecord(
            phase, attempt, self.round_index, ";".join(hosts), rail, ";".join(map(str, ranks)), self.size, iters,
            self.config.samples, time_us, min(per_sample), max(per_sample), algbw, factor,
            bandwidth.busbw_gbps(algbw, factor), best,
        )
        with faults.signals_held():
            self.report.records.append(record)
            if self.writer is not None:
                self.writer.append_cells("" if v is None else v for v in dataclasses.astuple(record))
        return best

    def _intra_round(self, attempt: int, hosts: list[str]) -> None:
        """All nodes at once, each an all_reduce among its own ranks; results kept for `hosts`."""
        import torch.distributed as tdist

        self.where = f"the intra-node all_reduce at {format_size(self.size)}"
        call = None
        if self.group is not None:
            def call():
                tdist.all_reduce(self.send, group=self.group)
        per_rank = self._samples(call)
        for node in self.nodes:
            if len(node.ranks) < 2 or node.host not in hosts:
                continue
            factor = bandwidth.all_reduce_factor(len(node.ranks))
            busbw = self._record("nodes", attempt, (node.host,), None, node.ranks, per_rank, factor)
            self.intra.setdefault(node.host, []).append(busbw)

    def _partner(self, pairs: schedule.Round) -> int | None:
        """The rank this rank exchanges with in a round: the same rail of the other node."""
        for a, b in pairs:
            for mine, other in ((self.nodes[a], self.nodes[b]), (self.nodes[b], self.nodes[a])):
                if self.ctx.rank in mine.ranks:
                    rail = mine.ranks.index(self.ctx.rank)
                    return other.ranks[rail] if rail < len(other.ranks) else None
        return None

    def _exchange(self, peer: int | None) -> Callable[[], None] | None:
        """Both ways at once with batched isend/irecv in the world group: no communicator per pair."""
        if peer is None:
            return None
        import torch.distributed as tdist

        def call():
            ops = [tdist.P2POp(tdist.isend, self.send, peer), tdist.P2POp(tdist.irecv, self.recv, peer)]
            for work in tdist.batch_isend_irecv(ops):
                work.wait()

        return call

    def _probe(self, first_round: schedule.Round) -> float:
        """One exchange of the first round, to say how long a round will take before starting."""
        self.where = "the probe exchange"
        call = self._exchange(self._partner(first_round)) or (lambda: None)
        elapsed = self.runner.time_block(call, 1)
        slowest = dist.max_across_ranks(self.ctx, [elapsed])[0]
        return slowest * (self.config.warmup + self.config.samples * self.config.iters)

    def _pair_round(self, pairs: schedule.Round, attempt: int) -> None:
        self.round_index += 1
        names = ", ".join(f"{self.nodes[a].host}-{self.nodes[b].host}" for a, b in pairs)
        self.where = f"pair round {self.round_index} ({names})"
        per_rank = self._samples(self._exchange(self._partner(pairs)))
        for a, b in pairs:
            first, second = self.nodes[a], self.nodes[b]
            for rail in range(min(len(first.ranks), len(second.ranks))):
                ranks = (first.ranks[rail], second.ranks[rail])
                factor = bandwidth.bus_factor("sendrecv", 2)
                busbw = self._record("pairs", attempt, (first.host, second.host), rail, ranks, per_rank, factor)
                self.pairs.setdefault((first.host, second.host, rail), []).append(busbw)
        self.observer.round_done()

    # -- verdicts -------------------------------------------------------------------------------
    def _judge(self) -> verdicts.Judgement:
        layout = [(n.host, n.ranks) for n in self.nodes]
        return verdicts.judge(layout, self.intra, self.pairs, self.config.tolerance, self.config.expect_gbps)

    def _judge_with_retests(self) -> verdicts.Judgement:
        """Re-measure every low result once before it can name anyone (quick mode: cross-check too)."""
        hosts = [n.host for n in self.nodes]
        judgement = self._judge()
        for attempt in range(2, 2 + MAX_RETEST_PASSES):
            plan = schedule.retests(judgement, hosts, set(self.pairs), self.config.quick and attempt == 2,
                                    self.config.seed)
            if not plan and not judgement.retest_intra:
                break
            rounds = [[pair] for pair in plan] if len(plan) <= SOLO_RETESTS else schedule.pack_rounds(plan)
            what = [f"{hosts[a]}-{hosts[b]}" for a, b in plan]
            what += [f"{host} (intra-node)" for host in judgement.retest_intra]
            self.observer.rounds_added(len(rounds), what)
            if judgement.retest_intra:
                self._intra_round(attempt, judgement.retest_intra)
            for pairs in rounds:
                self._pair_round(pairs, attempt)
            judgement = self._judge()
        return judgement
