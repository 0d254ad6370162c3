"""The doctor's body on the shared run life cycle (ranks/session.py), on every rank: the configuration
phase (each host's facts gathered in one collective and judged against the fleet, doctor/config_check.py),
then, unless config_only, intra-node all_reduce per host, node pairs rail by rail, re-tests. What it
records and reports is in doctor/doctor_report.py; the sweep's counterpart is sweep/sweep_body.py.

Hosts are told apart by hostname (as the sweep counts nodes); a host's ranks, in rank order, are
its rails 0, 1, ... Rail i of one node exchanges with rail i of the other, so every NIC works.
Every rank derives the same schedule and, from all-gathered times, the same verdicts, so the
re-tests need no extra coordination. Rank 0 alone writes the run folder and talks to the observer.

Timing: each measurement is one world barrier, so the pairs (or nodes) of a round start together,
then `warmup` untimed calls and `samples` samples of `iters` calls, each sample after only the
ranks it involves have met (the two of a pair, a node's ranks): a world barrier per sample would
cost every round `samples` barriers over all ranks, more than the exchanges themselves at 64 hosts
on two cores. A pair's sample time is the slower of its two ranks; doctor.csv reports the median
sample / iters as the sweep does, and the verdicts judge the fastest sample (best_busbw_gbps).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

from nccl_bench.doctor import config_check, roster, schedule, verdicts
from nccl_bench.doctor.doctor_config import ELEMENT_BYTES, PHASES, DoctorConfig, resolve_size
from nccl_bench.doctor.doctor_report import (
    DOCTOR_CSV,
    RECORD_COLUMNS,
    DoctorHeader,
    DoctorObserver,
    DoctorRecord,
    DoctorReport,
    Node,
    SilentObserver,
    write_report_json,
)
from nccl_bench.errors import OptionError, RunFailedError
from nccl_bench.ranks import devices, dist, faults, run_owner, session, star_gather
from nccl_bench.ranks.layout import LaunchEnv
from nccl_bench.ranks.planted import NoFaults, fault_seam
from nccl_bench.ranks.preflight import check_local_workers, chosen_backend
from nccl_bench.ranks.runner import PointRunner, TimingPlan
from nccl_bench.results.csv_appender import CsvAppender
from nccl_bench.results.run_folder import DOCTOR_JSON
from nccl_bench.results.whole_file import write_text_file
from nccl_bench.units import bandwidth, op_table, stats
from nccl_bench.units.sizes import format_size

# Re-test passes: the first confirms the first lows (and, in quick mode, adds cross-checks against
# nodes that passed), the second confirms low cross-checks; the third is only a bound.
MAX_RETEST_PASSES = 3
# Up to this many pairs, each re-test runs alone: what slowed a pair in its first round (a pair
# beside it sharing switches or, on simulated hosts, CPUs) is then absent the second time. More
# low pairs than this (a congested fabric) are re-tested packed into rounds like the first pass.
SOLO_RETESTS = 32


def group_nodes(hostnames: list[str]) -> list[Node]:
    """Hosts in order of their first rank; each host's ranks in rank order are its rails."""
    found: dict[str, list[int]] = {}
    for rank, host in enumerate(hostnames):
        found.setdefault(host, []).append(rank)
    return [Node(host, tuple(ranks)) for host, ranks in found.items()]


def execute(config: DoctorConfig, observer_factory: Callable[[int], DoctorObserver],
            on_stuck: Callable[[RunFailedError], None] | None = None) -> DoctorReport:
    """Run the doctor on this rank through the shared life cycle (ranks/session.py).
    observer_factory(rank) gives rank 0 its reporter; on_stuck: see session.execute."""
    session.require_launch()
    without_torch = star_gather.serves(not config.config_only, os.environ)  # --config-only measures nothing
    backend = chosen_backend(config.backend, without_torch)
    size = resolve_size(config, devices.device_kind(backend) == "cuda")
    request = session.RunRequest(
        command="doctor", backend=backend, timeout_s=config.timeout_s, out=config.out,
        results_root=config.results_root, folder_label=("doctor",), bytes_per_rank=2 * size,
        size_option="size_bytes",
        config={k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(config).items()},
        without_torch=without_torch,
    )
    body = _Doctor(config, size, observer_factory)
    session.execute(request, body, on_stuck)
    return body.report


def preflight(config: DoctorConfig, local_ranks: int) -> str:
    """What a launcher-less run refuses before starting workers: the backend, GPUs per worker, host memory.
    Returns the backend the ranks will use."""
    backend = chosen_backend(config.backend)
    size = resolve_size(config, devices.device_kind(backend) == "cuda")
    refused = schedule.nothing_to_measure(config.phases, [local_ranks])  # local workers share one host
    if refused is not None and not config.config_only:
        raise OptionError(_phase_or(config, "workers"), refused)
    check_local_workers("doctor", backend, local_ranks, 2 * size, "size_bytes")
    return backend


def _phase_or(config: DoctorConfig, layout_key: str) -> str:
    """The option (its key) to name when nothing can be measured: --phase when it narrowed the phases, else
    the layout's."""
    return "phases" if config.phases != PHASES else layout_key


class _Doctor:
    """One rank's doctor: the RunBody of session.execute, and the state every phase shares."""

    def __init__(self, config: DoctorConfig, size: int, observer_factory: Callable[[int], DoctorObserver]):
        self.config, self.size, self.observer_factory = config, size, observer_factory
        self.report = DoctorReport(run_dir=None)
        self.observer: DoctorObserver = SilentObserver()
        self.intra: dict[str, list[float]] = {}
        self.pairs: dict[verdicts.PairKey, list[float]] = {}
        self.writer: CsvAppender | None = None
        self.group = None  # this host's process group, for the intra-node all_reduce
        self.where = "the doctor"
        self.round_index = 0
        self.measurements = 0  # counts measurements for the planted-fault seam, as the sweep counts points
        self.planted: NoFaults = fault_seam(os.environ)
        self.config_hosts: list[config_check.HostFacts] = []  # the configuration phase's facts, one per host
        self.config_suspects: list[verdicts.Suspect] = []
        # Known from set_up on: the run, its process group and layout, when it started, its hosts, the header.
        self.run: session.Run | None = None
        self.ctx: dist.DistContext | None = None
        self.launch: LaunchEnv | None = None
        self.started_wall = 0.0  # time.monotonic() at set-up: the report's wall_s
        self.nodes: list[Node] = []
        self.header: DoctorHeader | None = None
        # Known from measure on: the buffers, the timing runner, this rank's node.
        self.send: Any = None  # a torch tensor: torch is imported only where a run measures
        self.recv: Any = None
        self.runner: PointRunner | None = None
        self.my_node: Node | None = None

    # -- the life cycle's steps -----------------------------------------------------------------
    def set_up(self, run: session.Run) -> None:
        self.run, self.ctx, self.launch = run, run.ctx, run.launch
        self.started_wall = time.monotonic()
        self.report.run_dir = run.run_dir
        self.observer = self.observer_factory(self.ctx.rank)
        self.nodes = group_nodes(run.hostnames)
        refused = schedule.nothing_to_measure(self.config.phases, [len(n.ranks) for n in self.nodes])
        if refused is not None and not self.config.config_only:
            raise OptionError(_phase_or(self.config, "launcher"), refused)
        self.header = self._header()
        self.report.header = self.header

    def meta(self) -> dict[str, Any]:
        return {"size_bytes": self.size, "notes": list(self.header.notes)}

    def measure(self, run: session.Run) -> None:
        if run.run_dir is not None:
            # A restarted elastic attempt measures everything again (its verdict compares the measurements
            # of one attempt): doctor.csv holds that attempt's records, never the first attempt's twice.
            self.writer = CsvAppender(run.run_dir / DOCTOR_CSV, RECORD_COLUMNS,
                                      start_afresh=run_owner.attempt(os.environ) > 0)
        self.observer.started(self.header)
        self._config_phase()
        if self.config.config_only:
            self.report.judgement = self._judge()
            return
        self._measure()
        self.report.judgement = self._judge_with_retests()

    def close(self, status: str) -> dict[str, Any]:
        self.report.status = status
        self.report.wall_s = time.monotonic() - self.started_wall
        # Once the configuration phase has its facts, its verdict stands whatever ends the run after it.
        if self.report.judgement is None and status != "complete" and self.header is not None and (
                self.intra or self.pairs or self.config_hosts):
            self.report.judgement = self._judged_so_far(status)
        if self.writer is not None:
            self.writer.close()
            if self.report.judgement is not None:
                write_report_json(self.report, self.report.run_dir / DOCTOR_JSON)
                if self.config.exclude_file is not None:
                    text = roster.exclude_file_text(self.report.judgement.suspects)
                    write_text_file(self.config.exclude_file, text)
        return {"verdict": self.report.verdict, "wall_s": self.report.wall_s}

    def finished(self, status: str) -> None:
        self.observer.finished(self.report)

    # -- set-up ---------------------------------------------------------------------------------
    def _phase_notes(self) -> list[str]:
        """What the measuring phases skip on this layout, said in the header."""
        notes = []
        config = self.config
        if "nodes" in config.phases and all(len(n.ranks) < 2 for n in self.nodes):
            notes.append("nodes phase skipped: every node has one rank, so there is no intra-node all_reduce")
        elif "nodes" in config.phases:
            notes.extend(
                f"node {n.host} has one rank: no intra-node all_reduce" for n in self.nodes if len(n.ranks) < 2
            )
        if "pairs" in config.phases and len(self.nodes) < 2:
            notes.append("pairs phase skipped: one node, no pair of nodes to test")
        if len({len(n.ranks) for n in self.nodes}) > 1:
            notes.append("nodes have different rank counts: a pair uses min(ranks) rails")
        return notes

    def _header(self) -> DoctorHeader:
        config = self.config
        notes = [] if config.config_only else self._phase_notes()  # a config-only run measures nothing
        expected, source = roster.expected_hosts(config.expect_hosts, self.launch.launcher, os.environ)
        return DoctorHeader(
            run=self.run.facts(), nodes=tuple(self.nodes), size_bytes=self.size, iters=config.iters,
            samples=config.samples, warmup=config.warmup, phases=("config",) if config.config_only else config.phases,
            mode="quick" if config.quick else "full", rounds=len(self._first_rounds()),
            tolerance=config.tolerance, expect_gbps=config.expect_gbps, notes=tuple(notes),
            expected_hosts=expected, expected_from=source, exclude_file=config.exclude_file,
        )

    def _first_rounds(self) -> list[schedule.Round]:
        if "pairs" not in self.config.phases or self.config.config_only:
            return []
        if self.config.quick:
            return schedule.random_rounds(len(self.nodes), self.config.quick_rounds, self.config.seed)
        return schedule.circle_rounds(len(self.nodes))

    # -- the configuration phase ----------------------------------------------------------------
    def _config_phase(self) -> None:
        """Every host's facts, read by its first rank, gathered to every rank in one collective and judged
        alike everywhere; the findings are shown before anything is measured."""
        from nccl_bench.doctor.config_facts import host_facts

        self.where = "the configuration phase"
        self.run.renew(self.where)
        node = next(n for n in self.nodes if self.ctx.rank in n.ranks)
        # NCCL prints its diagnostics report on the world communicator's rank 0, the first rank of its host.
        said = self.ctx.nccl_diag_lines if self.ctx.rank == 0 else ()
        mine = (host_facts(node.host, os.environ, self.ctx.on_gpu, said, self.ctx.star is not None)
                if node.ranks[0] == self.ctx.rank else None)
        self.config_hosts = [facts for facts in dist.gather_objects(self.ctx, mine, "its host's facts")
                             if facts is not None]
        self.run.disarm()
        self.config_suspects = config_check.judge_config(self.config_hosts, self.config.expect_config,
                                                           self.run.hostnames)
        self.report.notes.extend(config_check.unreported(self.config_hosts, self.config.expect_config)
                                 + config_check.fleet_wide_notes(self.config_hosts, self.config_suspects))
        self.observer.config_checked(config_check.summary_line(self.config_hosts, self.config_suspects),
                                     [suspect.line() for suspect in self.config_suspects])
        self.report.config_hosts = self.config_hosts

    # -- measuring ------------------------------------------------------------------------------
    def _measure(self) -> None:
        import torch

        elems = self.size // ELEMENT_BYTES
        self.send = torch.zeros(elems, dtype=torch.float32, device=self.ctx.device)
        self.recv = torch.zeros(elems, dtype=torch.float32, device=self.ctx.device)
        self.runner = PointRunner(self.ctx, TimingPlan(
            warmup=self.config.warmup, iters=self.config.iters, min_sample_s=0.0, trials=self.config.samples, agg="max",
        ), progress=self.run.renew)
        self.my_node = next(n for n in self.nodes if self.ctx.rank in n.ranks)
        if "nodes" in self.config.phases and any(len(n.ranks) > 1 for n in self.nodes):
            self.where = "making the per-host process groups"
            self.run.renew(self.where)
            self.group = self._node_group()
            self._intra_round(attempt=1, hosts=[n.host for n in self.nodes])
        rounds = self._first_rounds()
        if rounds:
            per_round_s = self._probe(rounds[0])
            self.observer.pairs_planned(len(rounds), per_round_s)
            for pairs in rounds:
                self._pair_round(pairs, attempt=1)

    def _node_group(self):
        """This host's ranks as a process group (None for a host of one rank), made once: one group
        per host of several ranks, N groups, not one per pair (dist.make_groups makes them, each with the
        default group's timeout, so gloo ends a stalled op at --timeout as in the sweep)."""
        made = dist.make_groups(self.ctx, [node.ranks for node in self.nodes if len(node.ranks) > 1])
        mine = made.get(self.my_node.ranks)
        return None if mine is None else mine.group

    def _samples(self, call: Callable[[], None] | None, meet: Callable[[], None] | None) -> list[list[float]]:
        """Every rank's sample times (seconds); NaN for a rank that sat the measurement out.
        meet: the ranks of this rank's pair or node wait for each other before each sample."""
        self.run.renew(self.where, at=(self.where, None, None))
        self.planted.point_starts(self.ctx.rank, self.measurements)
        self.measurements += 1
        idle = call is None
        call = call or (lambda: None)
        meet = meet or (lambda: None)
        dist.barrier(self.ctx)
        self.runner.warm_up(call)
        times = [self.runner.time_block(call, self.config.iters, meet) for _ in range(self.config.samples)]
        gathered = dist.all_gather_floats(self.ctx, [math.nan] * len(times) if idle else times)
        self.run.disarm()
        return gathered

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
        call = meet = None
        if self.group is not None:
            def call():
                tdist.all_reduce(self.send, group=self.group)

            def meet():
                tdist.barrier(group=self.group)
        per_rank = self._samples(call, meet)
        for node in self.nodes:
            if len(node.ranks) < 2 or node.host not in hosts:
                continue
            factor = op_table.bus_factor("all_reduce", len(node.ranks))
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

    def _meet(self, peer: int | None) -> Callable[[], None] | None:
        """The two ranks of a pair wait for each other (one element each way) and for no one else."""
        if peer is None:
            return None
        import torch
        import torch.distributed as tdist

        out, into = torch.zeros(1, device=self.ctx.device), torch.zeros(1, device=self.ctx.device)

        def meet():
            for work in tdist.batch_isend_irecv([tdist.P2POp(tdist.isend, out, peer),
                                                 tdist.P2POp(tdist.irecv, into, peer)]):
                work.wait()

        return meet

    def _probe(self, first_round: schedule.Round) -> float:
        """How long a round will take, said before starting: one exchange of the first round (after
        one untimed, which opens the pair's connection), the pair's meeting before a sample, and the
        round's two world collectives (its barrier, the gathering of its times)."""
        self.where = "the probe exchange"
        self.run.renew(self.where)
        partner = self._partner(first_round)
        call, meet = self._exchange(partner) or (lambda: None), self._meet(partner) or (lambda: None)
        dist.barrier(self.ctx)
        call()
        elapsed = self.runner.time_block(call, 1, meet)
        started = time.perf_counter()
        meet()
        met = time.perf_counter()
        dist.barrier(self.ctx)
        world = time.perf_counter() - met
        exchange_s, meet_s, world_s = dist.max_across_ranks(self.ctx, [elapsed, met - started, world])
        self.run.disarm()
        config = self.config
        return exchange_s * (config.warmup + config.samples * config.iters) + meet_s * config.samples + 2 * world_s

    def _pair_round(self, pairs: schedule.Round, attempt: int) -> None:
        self.round_index += 1
        names = ", ".join(f"{self.nodes[a].host}-{self.nodes[b].host}" for a, b in pairs)
        self.where = f"pair round {self.round_index} ({names})"
        partner = self._partner(pairs)
        per_rank = self._samples(self._exchange(partner), self._meet(partner))
        for a, b in pairs:
            first, second = self.nodes[a], self.nodes[b]
            for rail in range(min(len(first.ranks), len(second.ranks))):
                ranks = (first.ranks[rail], second.ranks[rail])
                factor = op_table.bus_factor("sendrecv", 2)
                busbw = self._record("pairs", attempt, (first.host, second.host), rail, ranks, per_rank, factor)
                self.pairs.setdefault((first.host, second.host, rail), []).append(busbw)
        self.observer.round_done()

    # -- verdicts -------------------------------------------------------------------------------
    def _judge(self) -> verdicts.Judgement:
        layout = [(n.host, n.ranks) for n in self.nodes]
        judgement = verdicts.judge(layout, self.intra, self.pairs, self.config.tolerance, self.config.expect_gbps)
        judgement.suspects[:0] = self.config_suspects
        judgement.suspects.extend(roster.missing_suspects(self.header.expected_hosts, [n.host for n in self.nodes],
                                                         self.header.expected_from))
        return judgement

    def _judged_so_far(self, status: str) -> verdicts.Judgement:
        """A run that ended early still says what its finished measurements support: the verdicts of
        those results, with where it stopped. A low result measured once names nobody (never re-tested)."""
        judgement = self._judge()
        results = sum(map(len, self.pairs.values())) + sum(map(len, self.intra.values()))
        facts = "the configuration phase's facts and " if self.config_hosts else ""
        judgement.notes.insert(0, f"the run {status} during {self.where}: these verdicts come from {facts}the "
                                  f"{results} result(s) measured before it; a low result measured once names nobody, "
                                  "since it was never re-tested")
        return judgement

    def _judge_with_retests(self) -> verdicts.Judgement:
        """Re-measure every low result once before it can name anyone (quick mode: cross-check too)."""
        hosts = [n.host for n in self.nodes]
        judgement = self._judge()
        for attempt in range(2, 2 + MAX_RETEST_PASSES):
            plan = schedule.retests(judgement, hosts, set(self.pairs), self.config.quick and attempt == 2,
                                    self.config.seed, with_controls=attempt == 2)
            if not plan and not judgement.retest_intra:
                break
            rounds = [[pair] for pair in plan] if len(plan) <= SOLO_RETESTS else schedule.pack_rounds(plan)
            low = set(judgement.retest_pairs)
            what = [f"{hosts[a]}-{hosts[b]}" + ("" if (hosts[a], hosts[b]) in low else " (control)") for a, b in plan]
            what += [f"{host} (intra-node)" for host in judgement.retest_intra]
            self.observer.rounds_added(len(rounds), what)
            if judgement.retest_intra:
                self._intra_round(attempt, judgement.retest_intra)
            for pairs in rounds:
                self._pair_round(pairs, attempt)
            judgement = self._judge()
        return judgement
