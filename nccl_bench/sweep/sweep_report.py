"""What a sweep tells its observer (rank 0's live reporter in the CLI): the header before the first
point, each row as it lands, the summary at the end. The doctor's counterpart is doctor/doctor_report.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nccl_bench.ranks.run_facts import RunFacts
from nccl_bench.results.schema import ResultRow


@dataclass(frozen=True)
class SweepHeader:
    """The sweep's set-up as its header prints it: the run's facts, then what the sweep measures and how."""

    run: RunFacts
    sizes: str
    iterations: str
    warmup: int
    trials: int
    dtype: str
    reduce_op: str
    agg: str
    peak: str | None = None
    notes: tuple[str, ...] = ()
    # (op, size_bytes, count) of every planned point: the live table sizes its columns from them
    planned: tuple[tuple[str, int, int], ...] = ()
    repeats: tuple[str, ...] = ()  # the table's repeat columns: "group" (--split), "cycle" (--cycles), "variant"
    cycles: int = 1
    variant: str = ""  # --nccl-env's settings of these ranks: the variant column's width


@dataclass
class SweepSummary:
    run_dir: Path | None
    rows: list[ResultRow] = field(default_factory=list)
    status: str = "running"
    notes: list[str] = field(default_factory=list)
    current_point: str | None = None  # what was being measured, for a failure message
    peak_gbps: float | None = None  # the %peak reference, for the plot rank 0's reporter draws
    plot_path: Path | None = None  # set by the reporter that wrote busbw.png
    expected: list[str] = field(default_factory=list)  # rank 0: each op's largest size against a public figure

    @property
    def wrong_total(self) -> int:
        return sum(r.wrong or 0 for r in self.rows)


class SweepObserver(Protocol):
    def started(self, header: SweepHeader, total_points: int) -> None: ...
    def cycle_started(self, cycle: int, cycles: int) -> None: ...
    def row_done(self, row: ResultRow) -> None: ...
    def finished(self, summary: SweepSummary) -> None: ...


class SilentObserver:
    """The observer of every rank but 0: the sweep runs the same, nothing is shown."""

    def started(self, header: SweepHeader, total_points: int) -> None:
        pass

    def cycle_started(self, cycle: int, cycles: int) -> None:
        pass

    def row_done(self, row: ResultRow) -> None:
        pass

    def finished(self, summary: SweepSummary) -> None:
        pass
