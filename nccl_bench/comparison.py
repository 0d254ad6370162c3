"""Verdicts for a current run against a baseline: per op and size, noise-aware, pure (rows in,
verdicts out; reading runs and storing baselines live in results/loader.py and sweep/saved_baselines.py).

Rows match on `results.KEY_COLUMNS` (op, size_bytes, dtype, redop, placement, world_size, variant). Each
matched row is judged on one metric: bus bandwidth for sizes >= min_bytes (a drop is worse), the
per-op time for smaller, latency-bound sizes or ops without a bandwidth (a rise is worse). A row
regresses when that metric is worse by more than the tolerance; when both runs measured several
trials, it must also be worse beyond the noise: the [time_min_us, time_max_us] ranges of the two
runs must not overlap (bandwidth is size / time, so the time ranges decide for both metrics).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from nccl_bench.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_VERDICT, UserInputError
from nccl_bench.option_types import percent
from nccl_bench.results.schema import (
    KEY_COLUMNS,
    STATUS_UNSUPPORTED,
    STATUS_WRONG,
    ResultRow,
    RunRows,
)
from nccl_bench.units.sizes import format_size

# 10% busbw is the run-to-run spread that scripts around nccl-tests commonly accept; tighter
# thresholds flap on shared CI nodes, looser ones miss a link that trained at a lower speed.
DEFAULT_TOLERANCE = 0.10
# Below ~64 KiB a collective's time is mostly fixed per-call latency (nccl-tests' small-message
# plateau), so its busbw is a latency number in disguise; judge those sizes on time instead.
DEFAULT_MIN_BYTES = 64 * 1024

METRIC_BUSBW = "busbw_gbps"
METRIC_TIME = "time_us"

VERDICT_OK = "ok"
VERDICT_REGRESSION = "regression"
VERDICT_FASTER = "faster"  # better by more than the tolerance: informational, never fails
VERDICT_NOISY = "noisy"  # worse by more than the tolerance, but the trial ranges overlap
VERDICT_WRONG = "wrong"  # the current run failed its data check: a failure whatever the speed
VERDICT_UNSUPPORTED = "unsupported"  # listed, not judged
VERDICT_NO_DATA = "no data"  # a side has no usable value for the metric
VERDICT_ONLY_BASELINE = "missing in current"
VERDICT_ONLY_CURRENT = "missing in baseline"

FAILING_VERDICTS = frozenset({VERDICT_REGRESSION, VERDICT_WRONG})
# Rows with a verdict on their numbers; a comparison with none of them judged nothing and does not pass.
JUDGED_VERDICTS = frozenset({VERDICT_REGRESSION, VERDICT_WRONG, VERDICT_NOISY, VERDICT_OK, VERDICT_FASTER})
VERDICT_ORDER = (
    VERDICT_REGRESSION, VERDICT_WRONG, VERDICT_NOISY, VERDICT_OK, VERDICT_FASTER,
    VERDICT_UNSUPPORTED, VERDICT_NO_DATA, VERDICT_ONLY_BASELINE, VERDICT_ONLY_CURRENT,
)



@dataclass(frozen=True)
class RowKey:
    op: str
    size_bytes: int
    dtype: str
    redop: str
    placement: str
    world_size: int | None  # None when --allow-mismatch matched across world sizes
    variant: str = ""  # --nccl-env's settings: each variant is a point of its own

    def label(self) -> str:
        parts = [self.op, format_size(self.size_bytes), self.dtype]
        if self.redop and self.redop != "none":
            parts.append(self.redop)
        parts.append(self.placement)
        if self.world_size is not None:
            parts.append(f"n={self.world_size}")
        if self.variant:
            parts.append(f"[{self.variant}]")
        return " ".join(parts)


@dataclass(frozen=True)
class RowComparison:
    """The verdict on one key; values are those of `metric` (None when a side has none)."""

    key: RowKey
    baseline: ResultRow | None
    current: ResultRow | None
    verdict: str
    metric: str | None = None
    baseline_value: float | None = None
    current_value: float | None = None
    delta_pct: float | None = None  # 100 * (current - baseline) / baseline, of `metric`
    ranges_overlap: bool | None = None  # None: not both runs had trials > 1
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING_VERDICTS


@dataclass(frozen=True)
class Comparison:
    baseline_label: str
    current_label: str
    tolerance: float  # fraction, 0.1 = 10%
    min_bytes: int
    rows: tuple[RowComparison, ...]
    notes: tuple[str, ...] = field(default=())  # mismatches let through by --allow-mismatch
    baseline_path: str | None = None  # the inputs as given, for machine-readable reports
    current_path: str | None = None

    @property
    def failures(self) -> tuple[RowComparison, ...]:
        return tuple(r for r in self.rows if r.failed)

    @property
    def judged(self) -> int:
        """Rows whose numbers were judged (the rest are listed: unsupported, no data, unmatched)."""
        return sum(row.verdict in JUDGED_VERDICTS for row in self.rows)

    @property
    def exit_code(self) -> int:
        """1 for a failure; 2 where nothing was judged (a gate that judged nothing must not pass); else 0."""
        return EXIT_VERDICT if self.failures else EXIT_BAD_INPUT if not self.judged else EXIT_OK

    def counts(self) -> dict[str, int]:
        """Rows per verdict, in VERDICT_ORDER, verdicts that occur only."""
        found = {v: 0 for v in VERDICT_ORDER}
        for row in self.rows:
            found[row.verdict] = found.get(row.verdict, 0) + 1
        return {v: n for v, n in found.items() if n}

    def summary(self) -> str:
        """One line: the outcome, the counts, the rule applied."""
        counts = self.counts()
        head = "REGRESSION" if self.failures else "NOTHING JUDGED" if not self.judged else "OK"
        body = ", ".join(f"{n} {v}" for v, n in counts.items()) or "no rows"
        return (
            f"{head}: {len(self.rows)} rows compared ({body}); "
            f"tolerance {percent(self.tolerance)}, latency-judged below {format_size(self.min_bytes)}"
        )


def compare_rows(
    baseline: Sequence[ResultRow],
    current: Sequence[ResultRow],
    tolerance: float = DEFAULT_TOLERANCE,
    min_bytes: int = DEFAULT_MIN_BYTES,
    allow_mismatch: bool = False,
    baseline_label: str = "baseline",
    current_label: str = "current",
) -> Comparison:
    """Match rows on their key and judge each pair; rows without a partner are listed, not dropped."""
    if not baseline:
        raise UserInputError(baseline_label, "has no result rows")
    if not current:
        raise UserInputError(current_label, "has no result rows")
    notes = _check_compatible(baseline, current, allow_mismatch, baseline_label, current_label)
    # different world sizes get past the check above only with allow_mismatch
    across_world_sizes = world_sizes(baseline) != world_sizes(current)
    base_index = _index(baseline, across_world_sizes, baseline_label)
    cur_index = _index(current, across_world_sizes, current_label)
    if not base_index.keys() & cur_index.keys():
        raise UserInputError(
            current_label,
            f"shares no (op, size, dtype, redop, placement, world size, variant) row with {baseline_label}; "
            "were they measured with the same ops and sizes?",
        )
    rows = [
        judge(key, row, cur_index.get(key), tolerance, min_bytes) for key, row in base_index.items()
    ]
    rows += [
        RowComparison(key, None, row, VERDICT_ONLY_CURRENT, reason="no baseline row to compare with")
        for key, row in cur_index.items()
        if key not in base_index
    ]
    return Comparison(baseline_label, current_label, tolerance, min_bytes, tuple(rows), tuple(notes))


def judge(
    key: RowKey,
    baseline: ResultRow,
    current: ResultRow | None,
    tolerance: float,
    min_bytes: int,
) -> RowComparison:
    """The verdict on one matched pair (current None: the row is missing from the current run)."""
    if current is None:
        return RowComparison(key, baseline, None, VERDICT_ONLY_BASELINE, reason="not measured in the current run")
    if STATUS_UNSUPPORTED in (baseline.status, current.status):
        side = "baseline" if baseline.status == STATUS_UNSUPPORTED else "current"
        return RowComparison(key, baseline, current, VERDICT_UNSUPPORTED, reason=f"unsupported in the {side} run")
    metric = _metric_for(key.size_bytes, baseline, current, min_bytes)
    base_value, cur_value = getattr(baseline, metric), getattr(current, metric)
    if current.status == STATUS_WRONG:
        wrong = "" if current.wrong is None else f" ({current.wrong} wrong elements)"
        return RowComparison(
            key, baseline, current, VERDICT_WRONG, metric, base_value, cur_value,
            _delta_pct(base_value, cur_value), reason=f"current run failed its data check{wrong}",
        )
    if base_value is None or cur_value is None or base_value <= 0:
        return RowComparison(
            key, baseline, current, VERDICT_NO_DATA, metric, base_value, cur_value,
            reason=f"no {metric} to compare",
        )
    delta = _delta_pct(base_value, cur_value)
    # A drop in busbw or a rise in time is "worse"; both are judged against the same tolerance.
    worse_pct = -delta if metric == METRIC_BUSBW else delta
    overlap = trial_ranges_overlap(baseline, current)
    limit_pct = tolerance * 100
    what = f"{_metric_name(metric)} {_fmt(base_value)} -> {_fmt(cur_value)} {_unit(metric)} ({delta:+.1f}%)"
    tol = percent(tolerance)
    if worse_pct > limit_pct and not overlap:
        verdict, why = VERDICT_REGRESSION, f"{what}: worse by more than {tol}"
        if overlap is False:
            why += " and the trial ranges do not overlap"
    elif worse_pct > limit_pct:
        verdict, why = VERDICT_NOISY, f"{what}: worse by more than {tol}, but the trial ranges overlap"
    elif -worse_pct > limit_pct and not overlap:
        verdict, why = VERDICT_FASTER, f"{what}: better by more than {tol}"
    elif abs(worse_pct) > limit_pct:
        verdict, why = VERDICT_OK, f"{what}: better by more than {tol}, but the trial ranges overlap"
    else:
        verdict, why = VERDICT_OK, f"{what}: within {tol}"
    return RowComparison(key, baseline, current, verdict, metric, base_value, cur_value, delta, overlap, why)


def trial_ranges_overlap(baseline: ResultRow, current: ResultRow) -> bool | None:
    """Whether the [time_min_us, time_max_us] spreads across trials overlap; None unless both have trials > 1."""
    spans = []
    for row in (baseline, current):
        if row.trials <= 1 or row.time_min_us is None or row.time_max_us is None:
            return None
        spans.append((row.time_min_us, row.time_max_us))
    (base_lo, base_hi), (cur_lo, cur_hi) = spans
    return base_lo <= cur_hi and cur_lo <= base_hi


def compare_runs(baseline: RunRows, current: RunRows, **rule) -> Comparison:
    """compare_rows of two runs as read (results/loader.read_run); `rule` is its tolerance, min_bytes
    and allow_mismatch. Messages name each run by its argument and path, reports by its path."""
    comparison = compare_rows(
        baseline.rows, current.rows, baseline_label=baseline.label, current_label=current.label, **rule
    )
    return dataclasses.replace(comparison, baseline_path=str(baseline.path), current_path=str(current.path))


def _check_compatible(
    baseline: Sequence[ResultRow], current: Sequence[ResultRow], allow_mismatch: bool,
    baseline_label: str, current_label: str,
) -> list[str]:
    notes = []
    for what, values in (("world size", world_sizes), ("backend", backends)):
        base, cur = values(baseline), values(current)
        if base == cur:
            continue
        text = f"{what} differs: {baseline_label} has {joined(base)}, {current_label} has {joined(cur)}"
        if not allow_mismatch:
            raise UserInputError(current_label, f"{text}; pass --allow-mismatch to compare anyway")
        notes.append(text)
    return notes


def _index(rows: Iterable[ResultRow], across_world_sizes: bool, label: str) -> dict[RowKey, ResultRow]:
    index: dict[RowKey, ResultRow] = {}
    for row in rows:
        key = RowKey(
            row.op, row.size_bytes, row.dtype, row.redop, row.placement,
            None if across_world_sizes else row.world_size, row.variant,
        )
        if key in index:
            raise UserInputError(label, f"has two rows for {key.label()}; compare needs one row per {KEY_COLUMNS}")
        index[key] = row
    return index


def _metric_for(size_bytes: int, baseline: ResultRow, current: ResultRow, min_bytes: int) -> str:
    """Time below min_bytes, and where a side has no busbw or a busbw of 0 by definition (an (n-1)/n
    collective at one rank moves nothing between ranks, yet its time still says how fast the run went)."""
    if size_bytes < min_bytes or not baseline.busbw_gbps or not current.busbw_gbps:
        return METRIC_TIME
    return METRIC_BUSBW


def _delta_pct(base: float | None, cur: float | None) -> float | None:
    if base is None or cur is None or base <= 0:
        return None
    return 100.0 * (cur - base) / base


def world_sizes(rows: Iterable[ResultRow]) -> frozenset[int | None]:
    """The world sizes a run's rows were measured at: one, unless runs were joined."""
    return frozenset(r.world_size for r in rows)


def backends(rows: Iterable[ResultRow]) -> frozenset[str]:
    """The backends a run's rows were measured with."""
    return frozenset(r.backend for r in rows)


def joined(values: Iterable[object]) -> str:
    """world_sizes or backends as a message names them: 2/4, gloo/nccl."""
    known = sorted(v for v in values if v is not None)
    return "/".join([str(v) for v in known] + (["unknown"] if None in values else []))


def _metric_name(metric: str) -> str:
    return "busbw" if metric == METRIC_BUSBW else "time"


def _unit(metric: str) -> str:
    return "GB/s" if metric == METRIC_BUSBW else "us"


def _fmt(value: float) -> str:
    return f"{value:.4g}"
