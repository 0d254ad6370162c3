"""Each series' summary: its newest runs walked by the rule (the verdict of each, the latest's last),
what changed for a regression, and (for show and the page) its aggregates over the whole history.

A series is read through its own index range, DEPTH_WINDOWS x window runs back plus the first runs
of its accepted level: the cost follows the series asked and the window, never the store's size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator

from nccl_bench.history import rule
from nccl_bench.history.changes import Change, differences, merged
from nccl_bench.history.store_schema import SERIES_COLUMNS
from nccl_bench.units.stats import median


@dataclass(frozen=True)
class Asked:
    """Which series and how: --op, --system, --window, --floor, and --run (a full run id, or None: each
    series' latest)."""

    op: str | None
    system: str | None
    window: int
    floor: float
    run_id: str | None = None
    until: tuple[str, str] | None = None  # (started_utc, run_id) of --run: nothing newer is read


@dataclass(frozen=True)
class SeriesSummary:
    key: dict[str, Any]  # SERIES_COLUMNS -> value
    runs: int | None  # usable runs in the whole history (None: not read, as check does not)
    min_gbps: float | None
    max_gbps: float | None
    window: tuple[rule.Point, ...]  # the runs read, oldest first, the judged run last
    verdicts: tuple[rule.Verdict, ...]  # the rule's verdict of each of them
    changed: tuple[Change, ...] = ()  # what differs from the runs it was judged against (regressions)
    skipped: int = 0  # stored values among the runs read that are no measurement (inf, NaN, negative): left out

    def newest(self, count: int) -> "SeriesSummary":
        """The same summary with only its newest `count` runs (the page draws those)."""
        return replace(self, window=self.window[-count:], verdicts=self.verdicts[-count:])

    @property
    def verdict(self) -> rule.Verdict:
        return self.verdicts[-1]

    @property
    def latest(self) -> rule.Point:
        return self.window[-1]

    @property
    def median_gbps(self) -> float:
        return median([p.busbw_gbps for p in self.window])

    def as_json(self) -> dict[str, Any]:
        verdict, change = self.verdict, self.verdict.change
        return {
            **self.key, "runs": self.runs, "latest_busbw_gbps": self.latest.busbw_gbps,
            "median_busbw_gbps": verdict.median_gbps, "threshold_busbw_gbps": verdict.threshold_gbps,
            "min_busbw_gbps": self.min_gbps, "max_busbw_gbps": self.max_gbps,
            "change_pct": None if change is None else 100 * change, "latest_run": self.latest.run_id,
            "latest_utc": self.latest.started_utc, "verdict": verdict.status, "flagged_by": verdict.flagged_by or None,
            "step_start_run": None if verdict.step_start is None else verdict.step_start.run_id,
            "step_runs": verdict.step_runs, "accepted_reason": self.latest.accepted,
            "changed": [c.as_json() for c in self.changed], "figure": figure_name(self.key),
        }


def summaries(store, asked: Asked, aggregates: bool = False) -> Iterator[SeriesSummary]:
    """Every series asked, in series order; with `aggregates`, runs, min and max over its whole history."""
    keys = store.run_series(asked.run_id) if asked.run_id else store.series_keys(asked.system, asked.op)
    totals = _aggregates(store, asked.op) if aggregates else None
    for series, *values in keys:
        key = dict(zip(SERIES_COLUMNS, values, strict=True))
        if (asked.op and key["op"] != asked.op) or (asked.system and key["system"] != asked.system):
            continue
        points, anchor = _read(store, str(series), int(key["size_bytes"]), asked)
        if not points or (asked.run_id and points[-1].run_id != asked.run_id):
            continue
        runs, low, high = totals.get(series, (None, None, None)) if totals is not None else (None, None, None)
        verdicts = rule.walk(points, asked.window, asked.floor, anchor)
        skipped = store.unusable_values(str(series), (points[0].started_utc, points[0].run_id))
        yield SeriesSummary(key, runs, low, high, tuple(points), tuple(verdicts), skipped=skipped)


def _aggregates(store, op: str | None) -> dict[str, tuple[int, float, float]]:
    """Each series' runs and the lowest and highest of the figure it is judged on (judged_figure): its
    busbw, or for a series whose busbw is 0 by definition its algbw, lowest at the slowest run."""
    found = {}
    for series, *rest in store.series_aggregates(op):
        key = dict(zip(SERIES_COLUMNS, rest[:len(SERIES_COLUMNS)], strict=True))
        runs, low, high, fastest, slowest = rest[len(SERIES_COLUMNS):]
        size = int(key["size_bytes"])
        if figure_name(key) == "algbw" and fastest and slowest:
            low, high = judged_figure(0.0, slowest, size), judged_figure(0.0, fastest, size)
        found[series] = (int(runs), float(low), float(high))
    return found


def _read(store, series: str, size_bytes: int, asked: Asked) -> tuple[list[rule.Point], list[rule.Point]]:
    """The series' newest runs (oldest first) with the accepted ones marked, and the first runs of its
    accepted level when that level started before them."""
    depth = rule.DEPTH_WINDOWS * asked.window + 1
    rows = store.series_recent(series, depth, asked.until)[::-1]
    if not rows:
        return [], []
    last = (rows[-1][1], rows[-1][0])
    accepts = {run_id: (started, reason) for run_id, started, reason, _ in store.accepts_of(series)
               if (started, run_id) <= last}

    def points_of(stored) -> list[rule.Point]:
        return [rule.Point(run_id, started, judged_figure(float(busbw), time_us, size_bytes),
                           None if noise is None else float(noise), accepts.get(run_id, (None, None))[1])
                for run_id, started, busbw, noise, time_us in stored]

    points = points_of(rows)
    if len(rows) < depth:
        return points, []  # the whole series is read: its first runs or its accepted run are among them
    level = max(((started, run_id) for run_id, (started, _) in accepts.items()), default=None)
    if level is not None and level >= (points[0].started_utc, points[0].run_id):
        return points, []
    return points, points_of(store.series_first(series, rule.ANCHOR_RUNS, level))


def judged_figure(busbw_gbps: float, time_us: float | None, size_bytes: int) -> float:
    """The figure a series is judged on: its busbw, or, where the busbw is 0 by definition (an (n-1)/n
    collective at one rank moves nothing between ranks), its algbw (size / time), which still says how
    fast the run went; 0 where neither says anything (the rule then leaves the run out)."""
    if busbw_gbps > 0 or not time_us or time_us <= 0:
        return busbw_gbps
    return size_bytes / time_us / 1e3


def figure_name(key: dict[str, Any]) -> str:
    """What a series' GB/s are: busbw, or algbw for a series whose busbw is 0 by definition (judged_figure)."""
    from nccl_bench.units.op_table import bus_factor

    ranks = key.get("world_size")
    return "algbw" if ranks and bus_factor(str(key["op"]), int(ranks)) == 0 else "busbw"


def with_changes(store, found: Iterable[SeriesSummary]) -> list[SeriesSummary]:
    """Each regression with what changed: its run (and a step's first run) against the runs it was
    judged against. One read of the meta.json of every run involved."""
    found = list(found)
    flagged = [s for s in found if s.verdict.status == rule.REGRESSION]
    wanted = {p.run_id for s in flagged for p in (s.latest, s.verdict.step_start, *s.verdict.reference) if p}
    metas = store.run_metas(sorted(wanted)) if wanted else {}
    out = []
    for summary in found:
        if summary.verdict.status == rule.REGRESSION:
            summary = replace(summary, changed=changed_for(summary.verdict, metas))
        out.append(summary)
    return out


def changed_for(verdict: rule.Verdict, metas: dict[str, dict[str, Any]]) -> tuple[Change, ...]:
    before = [metas[p.run_id] for p in verdict.reference if p.run_id in metas]
    runs = [p for p in (verdict.step_start, verdict.latest) if p is not None and p.run_id in metas]
    return merged(*(differences(metas[p.run_id], before) for p in runs))


def system_label(key: dict[str, Any]) -> str:
    """The system a series ran on, with its --nccl-env variant when it had one."""
    return f"{key['system']} [{key['variant']}]" if key.get("variant") else str(key["system"])


def where(key: dict[str, Any]) -> str:
    from nccl_bench.units.sizes import format_size

    judged_on = "; judged on algbw, busbw being 0 at one rank" if figure_name(key) == "algbw" else ""
    return (f"{key['op']} {key['placement']} {format_size(key['size_bytes'])} {key['dtype']} "
            f"on {system_label(key)} ({key['world_size']} ranks, {key['nodes']} node(s), {key['backend']}{judged_on})")


def describe(summary: SeriesSummary) -> str:
    """One line naming a regression: op, size, system, the numbers, where a step began, what changed."""
    verdict = summary.verdict
    against = ("the accepted level" if verdict.flagged_by == rule.DRIFT
               else f"median of {len(verdict.reference)} earlier runs")
    line = (f"{where(summary.key)}: {verdict.latest.busbw_gbps:.3g} GB/s in run {verdict.latest.run_id[:12]} "
            f"({verdict.latest.started_utc}) is below {verdict.threshold_gbps:.3g} GB/s "
            f"({100 * verdict.change:+.1f}% against {verdict.median_gbps:.3g} GB/s, the {against})")
    if verdict.step_start is not None and verdict.step_runs > 1:
        line += (f"; a lasting change over {verdict.step_runs} runs, never accepted, starting with run "
                 f"{verdict.step_start.run_id[:12]} ({verdict.step_start.started_utc})")
    if summary.changed:
        line += "; changed: " + "; ".join(str(c) for c in summary.changed)
    elif verdict.status == rule.REGRESSION:
        line += "; nothing recorded changed (versions, variables, hosts, GPUs and settings are the same)"
    return line


def in_order(found) -> list[SeriesSummary]:
    """Series as a person reads them: by op, placement, then size as a number (the store orders by text)."""
    return sorted(found, key=lambda s: tuple(str(s.key[c]) if c != "size_bytes" else int(s.key[c])
                                             for c in SERIES_COLUMNS))
