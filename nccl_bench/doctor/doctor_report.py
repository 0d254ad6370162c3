"""What the doctor records and reports: doctor.csv's records, the header and the report its observer
(rank 0's reporter in the CLI) is told, and doctor.json written from the report. The sweep's
counterpart is sweep/sweep_report.py."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nccl_bench.doctor import config_check, roster, verdicts
from nccl_bench.ranks.run_facts import RunFacts
from nccl_bench.results.whole_file import strict_json, write_text_file

DOCTOR_CSV = "doctor.csv"
JSON_SCHEMA_VERSION = 3  # 2: `missing` suspects, expected_hosts and exclude; 3: `config` suspects and facts
CSV_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Node:
    host: str
    ranks: tuple[int, ...]  # rank of rail 0, rail 1, ...


@dataclass(frozen=True)
class DoctorHeader:
    """The doctor's set-up as its header prints it: the run's facts, then what the doctor measures and how."""

    run: RunFacts
    nodes: tuple[Node, ...]
    size_bytes: int
    iters: int
    samples: int
    warmup: int
    phases: tuple[str, ...]
    mode: str  # full | quick
    rounds: int  # pair rounds planned before re-tests
    tolerance: float
    expect_gbps: float | None
    notes: tuple[str, ...] = ()
    expected_hosts: tuple[str, ...] = ()  # hosts that should take part (doctor/roster.py)
    exclude_file: Path | None = None
    expected_from: str = ""  # --expect-hosts or SLURM_JOB_NODELIST

    @property
    def config_only(self) -> bool:
        """Only the configuration phase runs: nothing is measured."""
        return self.phases == ("config",)


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
    schema_version: int = CSV_SCHEMA_VERSION


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
    config_hosts: list[config_check.HostFacts] = field(default_factory=list)  # the configuration phase's facts

    @property
    def verdict(self) -> str:
        return self.judgement.verdict if self.judgement is not None else "unknown"


class DoctorObserver(Protocol):
    def started(self, header: DoctorHeader) -> None: ...
    def config_checked(self, summary: str, suspects: list[str]) -> None: ...
    def pairs_planned(self, rounds: int, per_round_s: float) -> None: ...
    def rounds_added(self, rounds: int, what: list[str]) -> None: ...
    def round_done(self) -> None: ...
    def finished(self, report: DoctorReport) -> None: ...


class SilentObserver:
    """The observer of every rank but 0: the doctor runs the same, nothing is shown."""

    def started(self, header: DoctorHeader) -> None:
        pass

    def config_checked(self, summary: str, suspects: list[str]) -> None:
        pass

    def pairs_planned(self, rounds: int, per_round_s: float) -> None:
        pass

    def rounds_added(self, rounds: int, what: list[str]) -> None:
        pass

    def round_done(self) -> None:
        pass

    def finished(self, report: DoctorReport) -> None:
        pass


def report_json(report: DoctorReport) -> dict[str, Any]:
    """doctor.json, schema_version 3 (docs/results.md)."""
    judgement, header = report.judgement, report.header
    fleet = {
        name: (
            None if stat is None
            else {"median_gbps": stat.median_gbps, "mad_gbps": stat.mad_gbps, "count": stat.count}
        )
        for name, stat in (("pairs", judgement.pair_fleet), ("intra", judgement.intra_fleet))
    }
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "status": report.status,  # not "complete": the verdicts of what was measured before the run ended
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
             "fleet_median_gbps": s.fleet_median_gbps, "reason": s.reason, "degraded": s.degraded}
            for s in judgement.suspects
        ],
        "wall_s": report.wall_s,
        "mode": header.mode,
        "size_bytes": header.size_bytes,
        "tolerance": header.tolerance,
        "expect_gbps": header.expect_gbps,
        "thresholds_gbps": {"pairs": judgement.pair_threshold_gbps, "intra": judgement.intra_threshold_gbps},
        "repeat_noise": None if judgement.repeat is None else asdict(judgement.repeat),
        "fleet": fleet,
        "notes": list(header.notes) + report.notes + judgement.notes,
        "expected_hosts": (
            {"hosts": list(header.expected_hosts), "source": header.expected_from} if header.expected_hosts else None
        ),
        "exclude": roster.excluded_hosts(judgement.suspects),
        "config": {"fleet": config_check.fleet_values(report.config_hosts),
                   "hosts": config_check.facts_json(report.config_hosts)},
    }


def write_report_json(report: DoctorReport, path: Path) -> None:
    write_text_file(path, strict_json(report_json(report), indent=2) + "\n")
