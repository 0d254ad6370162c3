"""Each series' summary: its aggregates over the whole history (SQL) and the verdict of its latest run
over the window (the rule), read as two streams in series order and joined one series at a time, so
memory holds one window, not the store."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Any, Iterator

from nccl_bench.history import rule
from nccl_bench.history.store_schema import SERIES_COLUMNS
from nccl_bench.units.stats import median


@dataclass(frozen=True)
class SeriesSummary:
    key: dict[str, Any]  # SERIES_COLUMNS -> value
    runs: int
    min_gbps: float
    max_gbps: float
    window: tuple[rule.Point, ...]  # the newest runs, oldest first, the latest last
    verdict: rule.Verdict

    @property
    def latest(self) -> rule.Point:
        return self.window[-1]

    @property
    def median_gbps(self) -> float:
        return median([p.busbw_gbps for p in self.window])

    def as_json(self) -> dict[str, Any]:
        change = self.verdict.change
        return {
            **self.key, "runs": self.runs, "latest_busbw_gbps": self.latest.busbw_gbps,
            "median_busbw_gbps": self.median_gbps, "min_busbw_gbps": self.min_gbps, "max_busbw_gbps": self.max_gbps,
            "change_pct": None if change is None else 100 * change, "latest_run": self.latest.run_id,
            "latest_utc": self.latest.started_utc, "verdict": self.verdict.status,
            "step_start_run": None if self.verdict.step_start is None else self.verdict.step_start.run_id,
        }


def summaries(store, op: str | None, window: int, floor: float) -> Iterator[SeriesSummary]:
    """Every usable series (of `op`, when given), in series order."""
    windows = groupby(store.series_windows(op, window + 1), key=lambda row: row[0])
    for aggregate in store.series_aggregates(op):
        series, *values = aggregate
        key = dict(zip(SERIES_COLUMNS, values[:len(SERIES_COLUMNS)], strict=True))
        runs, low, high = values[len(SERIES_COLUMNS):]
        points: tuple[rule.Point, ...] = ()
        for name, rows in windows:  # both streams are in series order
            if name == series:
                points = tuple(rule.Point(run_id, started, busbw) for _, run_id, started, busbw in rows)
                break
        yield SeriesSummary(key, int(runs), float(low), float(high), points, rule.judge(points, window, floor))


def system_label(key: dict[str, Any]) -> str:
    """The system a series ran on, with its --nccl-env variant when it had one."""
    return f"{key['system']} [{key['variant']}]" if key.get("variant") else str(key["system"])


def describe(summary: SeriesSummary) -> str:
    """One line naming a regression: op, size, system, the numbers, and where a step began."""
    from nccl_bench.units.sizes import format_size

    key, verdict = summary.key, summary.verdict
    where = (f"{key['op']} {key['placement']} {format_size(key['size_bytes'])} {key['dtype']} "
             f"on {system_label(key)} ({key['world_size']} ranks, {key['nodes']} node(s), {key['backend']})")
    line = (f"{where}: {verdict.latest.busbw_gbps:.3g} GB/s in run {verdict.latest.run_id[:12]} is below "
            f"{verdict.threshold_gbps:.3g} GB/s (median {verdict.median_gbps:.3g} of the previous runs)")
    if verdict.step_start is not None and verdict.step_runs > 1:
        line += (f"; a lasting change over {verdict.step_runs} runs, starting with run "
                 f"{verdict.step_start.run_id[:12]} ({verdict.step_start.started_utc})")
    return line


def in_order(found) -> list[SeriesSummary]:
    """Series as a person reads them: by op, placement, then size as a number (the store orders by text)."""
    return sorted(found, key=lambda s: tuple(str(s.key[c]) if c != "size_bytes" else int(s.key[c])
                                             for c in SERIES_COLUMNS))
