"""Verdicts for a current run against a baseline: per op and size, noise-aware, pure (rows in,
verdicts out; reading runs and storing baselines live in results/loader.py and results/baselines.py).

Rows match on `results.KEY_COLUMNS` (op, size_bytes, dtype, redop, placement, world_size). Each
matched row is judged on one metric: bus bandwidth for sizes >= min_bytes (a drop is worse), the
per-op time for smaller, latency-bound sizes or ops without a bandwidth (a rise is worse). A row
regresses when that metric is worse by more than the tolerance; when both runs measured several
trials, it must also be worse beyond the noise: the [time_min_us, time_max_us] ranges of the two
runs must not overlap (bandwidth is size / time, so the time ranges decide for both metrics).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, UserInputError
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
VERDICT_ORDER = (
    VERDICT_REGRESSION, VERDICT_WRONG, VERDICT_NOISY, VERDICT_OK, VERDICT_FASTER,
    VERDICT_UNSUPPORTED, VERDICT_NO_DATA, VERDICT_ONLY_BASELINE, VERDICT_ONLY_CURRENT,
)

_TOLERANCE_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")


@dataclass(frozen=True)
class RowKey:
    op: str
    size_bytes: int
    dtype: str
    redop: str
    placement: str
    world_size: int | None  # None when --allow-mismatch matched across world sizes

    def label(self) -> str:
        parts = [self.op, format_size(self.size_bytes), self.dtype]
        if self.redop and self.redop != "none":
            parts.append(self.redop)
        parts.append(self.placement)
        if self.world_size is not None:
            parts.append(f"n={self.world_size}")
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
    def exit_code(self) -> int:
        return EXIT_VERDICT if self.failures else EXIT_OK

    def counts(self) -> dict[str, int]:
        """Rows per verdict, in VERDICT_ORDER, verdicts that occur only."""
        found = {v: 0 for v in VERDICT_ORDER}
        for row in self.rows:
            found[row.verdict] = found.get(row.verdict, 0) + 1
        return {v: n for v, n in found.items() if n}

    def summary(self) -> str:
        """One line: the outcome, the counts, the rule applied."""
        counts = self.counts()
        head = "REGRESSION" if self.failures else "OK"
        body = ", ".join(f"{n} {v}" for v, n in counts.items()) or "no rows"
        return (
            f"{head}: {len(self.rows)} rows compared ({body}); "
            f"tolerance {format_tolerance(self.tolerance)}, latency-judged below {format_size(self.min_bytes)}"
        )


def parse_tolerance(text: str | float, option: str = "--tolerance") -> float:
    """'10%' or '0.1' -> 0.1. A bare number must be a fraction below 1, so '10' is refused as ambiguous."""
    match = _TOLERANCE_PATTERN.match(str(text))
    if not match:
        raise UserInputError(option, f"expected a percentage like 10% or a fraction like 0.1, got {text!r}")
    number, percent = float(match.group(1)), match.group(2)
    if percent:
        if number >= 100:
            raise UserInputError(option, f"must be below 100%, got {text!r}")
        return number / 100
    if number >= 1:
        raise UserInputError(option, f"{text!r} is ambiguous; write {number:g}% or a fraction below 1 like 0.1")
    return number


def format_tolerance(tolerance: float) -> str:
    return f"{tolerance * 100:g}%"


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
    across_world_sizes = _world_sizes(baseline) != _world_sizes(current)
    base_index = _index(baseline, across_world_sizes, baseline_label)
    cur_index = _index(current, across_world_sizes, current_label)
    if not base_index.keys() & cur_index.keys():
        raise UserInputError(
            current_label,
            f"shares no (op, size, dtype, redop, placement, world size) row with {baseline_label}; "
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
    tol = format_tolerance(tolerance)
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


def check_against_baseline(check: BaselineCheck, run: RunRows) -> Comparison:
    """What `sweep --baseline` runs after a sweep: the finished run against the baseline read before it."""
    baseline = RunRows(check.baseline, "--baseline", check.baseline_rows)
    return compare_runs(baseline, run, tolerance=check.tolerance, allow_mismatch=check.allow_mismatch)


@dataclass(frozen=True)
class BaselineCheck:
    """What `sweep --baseline/--tolerance/--save-baseline` asks for once the run is done."""

    baseline: Path | None
    tolerance: float
    save_name: str | None
    allow_mismatch: bool = False
    replace_baseline: bool = False
    baseline_rows: tuple[ResultRow, ...] = field(default=(), compare=False)  # read once, up front

    def with_rows(self, rows: Iterable[ResultRow]) -> BaselineCheck:
        """The check with the baseline's rows, as results/baselines.prepare_baselines read them."""
        return dataclasses.replace(self, baseline_rows=tuple(rows))


# Options only the process that owns the whole run acts on; local worker ranks never see them.
SWEEP_BASELINE_OPTIONS = ("--baseline", "--tolerance", "--save-baseline")
SWEEP_BASELINE_FLAGS = ("--allow-mismatch", "--replace-baseline")


def plan_baseline_check(
    baseline: Path | None, tolerance: str | None, save_name: str | None,
    allow_mismatch: bool = False, replace_baseline: bool = False,
) -> BaselineCheck | None:
    """The sweep's baseline options checked against each other before measuring, so a typo fails at
    once, not after the run; results/baselines.prepare_baselines then reads the files they name."""
    if tolerance is not None and baseline is None:
        raise UserInputError("--tolerance", "only applies with --baseline")
    if allow_mismatch and baseline is None:
        raise UserInputError("--allow-mismatch", "only applies with --baseline")
    if replace_baseline and save_name is None:
        raise UserInputError("--replace-baseline", "only applies with --save-baseline")
    if baseline is None and save_name is None:
        return None
    fraction = DEFAULT_TOLERANCE if tolerance is None else parse_tolerance(tolerance)
    return BaselineCheck(
        None if baseline is None else Path(baseline), fraction, save_name, allow_mismatch, replace_baseline
    )


def check_plan_against_baseline(
    check: BaselineCheck | None, world_size: int, backend: str, planned_keys: Iterable[tuple]
) -> None:
    """Before measuring: refuse a sweep that the baseline check would reject after it.

    planned_keys are (op, size_bytes, dtype, redop, placement) of every planned point; world size
    and backend are what the run will have. The same rules as compare_rows, minus the numbers.
    """
    if check is None or not check.baseline_rows:
        return
    label = f"--baseline {check.baseline}"
    baseline = check.baseline_rows
    for what, theirs, ours in (
        ("world size", _world_sizes(baseline), frozenset({world_size})),
        ("backend", _backends(baseline), frozenset({backend})),
    ):
        if theirs != ours and not check.allow_mismatch:
            raise UserInputError(
                label,
                f"{what} differs: the baseline has {_join(theirs)}, this sweep would run with {_join(ours)}; "
                "pass --allow-mismatch to compare anyway",
            )
    theirs = {(r.op, r.size_bytes, r.dtype, r.redop, r.placement) for r in baseline}
    if not theirs & set(planned_keys):
        raise UserInputError(
            label,
            "shares no (op, size, dtype, redop, placement) with this sweep's plan; "
            "measure the baseline's ops and sizes (see `nccl-bench report` of it)",
        )


def _check_compatible(
    baseline: Sequence[ResultRow], current: Sequence[ResultRow], allow_mismatch: bool,
    baseline_label: str, current_label: str,
) -> list[str]:
    notes = []
    for what, values in (("world size", _world_sizes), ("backend", _backends)):
        base, cur = values(baseline), values(current)
        if base == cur:
            continue
        text = f"{what} differs: {baseline_label} has {_join(base)}, {current_label} has {_join(cur)}"
        if not allow_mismatch:
            raise UserInputError(current_label, f"{text}; pass --allow-mismatch to compare anyway")
        notes.append(text)
    return notes


def _index(rows: Iterable[ResultRow], across_world_sizes: bool, label: str) -> dict[RowKey, ResultRow]:
    index: dict[RowKey, ResultRow] = {}
    for row in rows:
        key = RowKey(
            row.op, row.size_bytes, row.dtype, row.redop, row.placement,
            None if across_world_sizes else row.world_size,
        )
        if key in index:
            raise UserInputError(label, f"has two rows for {key.label()}; compare needs one row per {KEY_COLUMNS}")
        index[key] = row
    return index


def _metric_for(size_bytes: int, baseline: ResultRow, current: ResultRow, min_bytes: int) -> str:
    if size_bytes < min_bytes or baseline.busbw_gbps is None or current.busbw_gbps is None:
        return METRIC_TIME
    return METRIC_BUSBW


def _delta_pct(base: float | None, cur: float | None) -> float | None:
    if base is None or cur is None or base <= 0:
        return None
    return 100.0 * (cur - base) / base


def _world_sizes(rows: Iterable[ResultRow]) -> frozenset[int]:
    return frozenset(r.world_size for r in rows)


def _backends(rows: Iterable[ResultRow]) -> frozenset[str]:
    return frozenset(r.backend for r in rows)


def _join(values: Iterable[object]) -> str:
    return "/".join(str(v) for v in sorted(values))


def _metric_name(metric: str) -> str:
    return "busbw" if metric == METRIC_BUSBW else "time"


def _unit(metric: str) -> str:
    return "GB/s" if metric == METRIC_BUSBW else "us"


def _fmt(value: float) -> str:
    return f"{value:.4g}"


@dataclass(frozen=True)
class FloorCheck:
    """--min-busbw: each op's busbw at its largest measured size against one floor (GB/s = 1e9 B/s)."""

    floor_gbps: float
    checked: tuple[ResultRow, ...]  # every row at its op's largest measured size (both placements)
    below: tuple[ResultRow, ...]  # those of them under the floor
    unchecked_ops: tuple[str, ...]  # ops without one measured busbw (unsupported by the backend)

    @property
    def exit_code(self) -> int:
        return EXIT_VERDICT if self.below else EXIT_OK


def check_floor(rows: Sequence[ResultRow], floor_gbps: float) -> FloorCheck:
    """The floor rule: per op, the largest size with a measured busbw; each of its rows must reach the floor."""
    ops = list(dict.fromkeys(r.op for r in rows if r.busbw_factor is not None or r.status == STATUS_UNSUPPORTED))
    checked: list[ResultRow] = []
    for op in ops:
        measured = [r for r in rows if r.op == op and r.busbw_gbps is not None]
        if measured:
            largest = max(r.size_bytes for r in measured)
            checked += [r for r in measured if r.size_bytes == largest]
    unchecked = tuple(op for op in ops if all(r.op != op for r in checked))
    below = tuple(r for r in checked if r.busbw_gbps < floor_gbps)
    return FloorCheck(floor_gbps, tuple(checked), below, unchecked)


def floor_row_text(row: ResultRow) -> str:
    return f"{row.op} {format_size(row.size_bytes)} {row.placement}: {row.busbw_gbps:.2f} GB/s"
