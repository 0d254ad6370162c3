"""The regression rule, pure: is a series' run below what the series' own noise allows?

Everything is judged in log space (y = ln busbw), so a change is a ratio, the spread of a series is
relative, and no threshold can fall below zero GB/s. docs/history.md states the rule with its
formulas and measured false-alarm and detection figures; in short, for the run judged (y) against
the reference runs before it:

    center    = median of y over the reference runs of the current level (since the last accepted run)
    s_between = 1.4826 x median |successive difference of the reference runs' y| / sqrt(2),  dof = diffs / 2
    s_within  = median of the uncertainty of each run's own figure (records.within_run_noise)
    s         = max(s_between, s_within),  dof += m x min(1, (2 s_within / s_between)^2)  (m runs with a spread)
    smallest  = -ln(1 - floor) x max(1, SETTLED_RUNS / r)      (r: passing runs the walk has seen before)
    allowed   = max(t(Z_ALARM, dof) x s x sqrt(1 + pi / (2 n)),  smallest)
    threshold = center - allowed                 (a regression: y < threshold, i.e. busbw < e^threshold)

- Successive differences, not deviations from the median, measure the spread: a slow drift or an
  earlier step does not widen the band (a slide of 3% per run would otherwise hide itself).
- t(Z_ALARM, dof) is Student's t quantile at the normal quantile Z_ALARM (Cornish-Fisher expansion,
  Abramowitz & Stegun 26.7.5) for the evidence the spread rests on: few runs, a wide band. Z_ALARM = 4
  keeps the chance that normal noise flags a series under 1 in 30,000 per judged run once the spread
  is known; a MAD carries about half of what as many squared differences would (MAD_EFFICIENCY).
- The uncertainty of a run's own figure is a floor of the spread (no series is steadier than what each
  of its runs could measure) and each run's counts as WITHIN_DOF_PER_RUN = 1 difference while the runs
  agree no worse than twice it: a quiet series is judged by its trials before its runs are many; where
  runs disagree more, their own spread decides. It is the uncertainty of the figure (the spread of trial
  means over the root of their count), never the spread of single ops, which a mean over hundreds of
  ops does not carry: on a CPU host single ops vary 4-8x while whole runs agree within a few percent.
- A series whose allowed drop reaches a halving (MAX_JUDGED_DROP) is too noisy to judge: it is said
  so (TOO_NOISY), with its band, never "ok"; more trials, longer samples or a quieter host steady it.
- sqrt(1 + pi/(2n)) is the prediction interval's widening for a center that is a median of n runs.
- floor is the smallest change worth flagging (--floor, a few percent): a quiet series with a MAD of
  0 does not flag a 1% wobble, yet a 10% drop on a fabric whose spread is 1% is flagged at once.
- The smallest drop flagged is wider while the series is young (SETTLED_RUNS): a few runs that agree
  with their trials have not yet shown how far whole runs wander (another job's load between runs, a
  host's clocks), which no trial can see. With 3% it is 11.5% at 3 earlier runs, 8.7% at 4, 5.9% at 6
  and 3% from 12 on: a 15% drop is flagged at the first judged run, a 10% one from 4 earlier runs on.

The walk: the series' runs are judged oldest first; a run judged a regression never joins the
reference of the runs after it, so a lasting change keeps failing until a person accepts it
(`history accept`), and never becomes the new normal by itself. An accepted run starts a new level:
its center is the runs since it, while the spread still comes from the runs before (it is relative).

The drift rule: the run is also judged against the accepted level, the median of the first
ANCHOR_RUNS runs of the current level (since the last accepted run, or the series' first runs), with
the same allowed change: a slide of a few percent per run, each run within the noise of the last,
fails once it adds up, and it fails for as long as it lasts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from nccl_bench.units.stats import MAD_TO_SIGMA, median, t_quantile

Z_ALARM = 4.0
# Two differences are the fewest a spread is taken from: three runs of a new series are recorded,
# the fourth is the first judged.
MIN_PRIOR_RUNS = 3
# A median absolute difference carries about as much as half as many squared ones (a MAD's efficiency
# is 37% at a normal sample; a half was measured to keep the false alarms of 6- to 20-run series under
# 1 in 4,000 while a 15-sigma drop at 10 runs is caught 7 times in 10: docs/history.md).
MAD_EFFICIENCY = 0.5
# Each run's own within-run spread counts as one more difference (a spread from at least two trials)
# while the runs agree as well as their trials do: a new series whose trials agree to 1% is judged by
# that before its runs are many. Runs that disagree more than twice their trials fade it out
# ((2 within / between)^2): between-run noise that trials cannot see (another job's load) is then
# judged by the runs alone.
WITHIN_DOF_PER_RUN = 1.0
# Until a series has passed this many runs, the smallest drop flagged is the floor x SETTLED_RUNS / runs
# (in log space). Measured on a tc-shaped link under load (docs/history.md): a run 5.6% slow after four
# runs that agreed within 0.4% and with their trials, the only alarm of 17 unchanged runs.
SETTLED_RUNS = 12
AGREE = 2.0  # runs whose spread is within twice their trials' agree with them (an estimate from few runs)
ANCHOR_RUNS = 5  # the accepted level: the median of a level's first five runs
DEPTH_WINDOWS = 3  # the walk reads the newest 3 x window runs: a step is judged against the window before it

# A series whose allowed drop reaches a halving is too noisy to judge: no drop short of that would be
# flagged, so "ok" would say nothing. It is said so, with its spread, never "ok".
MAX_JUDGED_DROP = math.log(2)

OK, REGRESSION, TOO_FEW, ACCEPTED, TOO_NOISY = "ok", "regression", "too_few", "accepted", "too_noisy"
DROP, DRIFT = "drop", "drift"  # what flagged a regression: the recent runs, or the accepted level


@dataclass(frozen=True)
class Point:
    run_id: str
    started_utc: str
    busbw_gbps: float
    noise: float | None = None  # the uncertainty of the run's own figure, log sigma (records.within_run_noise)
    accepted: str | None = None  # the reason, when a person accepted this run as the new normal


@dataclass(frozen=True)
class Verdict:
    status: str  # OK, REGRESSION, TOO_FEW, ACCEPTED or TOO_NOISY
    latest: Point
    median_gbps: float | None  # the reference level: the center the run was judged against
    threshold_gbps: float | None
    step_start: Point | None = None  # the run a regression started with (the latest itself: one bad run)
    step_runs: int = 0  # runs since the change, the latest included
    reference: tuple[Point, ...] = ()  # the runs the latest was judged against, oldest first
    flagged_by: str = ""  # DROP or DRIFT for a regression
    anchor_gbps: float | None = None  # the accepted level (median of its first runs)

    @property
    def change(self) -> float | None:
        """Latest against the reference level, as a fraction (-0.5: half)."""
        if not self.median_gbps:
            return None
        return self.latest.busbw_gbps / self.median_gbps - 1

    @property
    def judged(self) -> bool:
        return self.status in (OK, REGRESSION)


def between_spread(levels: Sequence[Sequence[float]]) -> tuple[float, int]:
    """(sigma of one run, dof) from successive differences of log values within each level: a step
    moves one difference, a drift adds its slope to each (in the median, not squared)."""
    differences = [abs(b - a) for level in levels for a, b in zip(level, level[1:], strict=False)]
    if len(differences) < 2:
        return 0.0, 0.0
    return MAD_TO_SIGMA * median(differences) / math.sqrt(2), len(differences) * MAD_EFFICIENCY


def allowed_drop(levels: Sequence[Sequence[float]], noises: Sequence[float], n_center: int, floor: float,
                 runs_seen: int) -> float:
    """The log drop below the center a run may show before it is a regression (the module's formula);
    `runs_seen`: the passing runs before it, the window's and older."""
    spread, dof = between_spread(levels)
    if noises:  # the runs' own spread: evidence in full while the runs agree as well as their trials do
        within = median(noises)
        weight = min(1.0, (AGREE * within / spread) ** 2) if spread > 0 else 1.0
        spread, dof = max(spread, within), dof + WITHIN_DOF_PER_RUN * len(noises) * weight
    allowed = t_quantile(Z_ALARM, dof) * spread * math.sqrt(1 + math.pi / (2 * max(1, n_center)))
    return max(allowed, smallest_flagged(floor, runs_seen))


def smallest_flagged(floor: float, runs: int) -> float:
    """The log drop below which nothing is flagged: the floor, widened while the series has fewer than
    SETTLED_RUNS runs (whole runs wander in ways their trials cannot show until there are several)."""
    return -math.log1p(-floor) * max(1.0, SETTLED_RUNS / max(1, runs))


def judge(points: Sequence[Point], window: int, floor: float, anchor: Sequence[Point] = ()) -> Verdict:
    """The last of `points` (oldest first) after walking the runs before it (see the module's doc).
    `anchor`: the first runs of the current level when they are older than `points` (else found in them)."""
    return walk(points, window, floor, anchor)[-1]


def walk(points: Sequence[Point], window: int, floor: float, anchor: Sequence[Point] = ()) -> list[Verdict]:
    """The verdict of every point, oldest first, each judged against the passing runs before it."""
    reference: list[Point] = []  # runs that passed (or were accepted, or too early to judge), oldest first
    level_anchor: list[Point] = list(anchor[:ANCHOR_RUNS])
    verdicts: list[Verdict] = []
    for point in points:
        if point.accepted is not None:
            verdicts.append(Verdict(ACCEPTED, point, point.busbw_gbps, None, reference=tuple(reference[-window:])))
            reference.append(point)
            level_anchor = [point]
            continue
        verdict = _judge_one(point, reference[-window:], level_anchor, floor, len(reference))
        if verdict.status == REGRESSION:
            start = len(verdicts)
            while start > 0 and verdicts[start - 1].status == REGRESSION:
                start -= 1
            first = verdicts[start].latest if start < len(verdicts) else point
            verdict = replace(verdict, step_start=first, step_runs=len(verdicts) - start + 1)
        else:
            reference.append(point)
            if len(level_anchor) < ANCHOR_RUNS and point.run_id not in {p.run_id for p in level_anchor}:
                level_anchor.append(point)
        verdicts.append(verdict)
    return verdicts


def _judge_one(point: Point, reference: Sequence[Point], anchor: Sequence[Point], floor: float,
               runs_seen: int) -> Verdict:
    # A figure of 0 (or less) is no level to judge against: such runs are left out of the reference.
    reference = [p for p in reference if p.busbw_gbps > 0]
    anchor = [p for p in anchor if p.busbw_gbps > 0]
    if len(reference) < MIN_PRIOR_RUNS:
        center = median([p.busbw_gbps for p in reference]) if reference else None
        return Verdict(TOO_FEW, point, center, None, reference=tuple(reference))
    levels = _levels(reference)
    current = levels[-1]
    noises = [p.noise for p in (*reference, point) if p.noise is not None]
    center = median([math.log(p.busbw_gbps) for p in current])
    log_levels = [[math.log(p.busbw_gbps) for p in level] for level in levels]
    allowed = allowed_drop(log_levels, noises, len(current), floor, runs_seen)
    y = math.log(point.busbw_gbps) if point.busbw_gbps > 0 else -math.inf
    anchor_gbps = None
    flagged = DROP if y < center - allowed else ""
    anchored = [p for p in anchor if p.run_id != point.run_id]
    if anchored:
        anchor_center = median([math.log(p.busbw_gbps) for p in anchored])
        anchor_gbps = math.exp(anchor_center)
        anchor_allowed = allowed_drop(log_levels, noises, len(anchored), floor, runs_seen)
        if not flagged and y < anchor_center - anchor_allowed:
            flagged = DRIFT
            center, allowed = anchor_center, anchor_allowed
    status = REGRESSION if flagged else TOO_NOISY if allowed >= MAX_JUDGED_DROP else OK
    return Verdict(status, point, math.exp(center), math.exp(center - allowed),
                   reference=tuple(reference), flagged_by=flagged, anchor_gbps=anchor_gbps)


def _levels(reference: Sequence[Point]) -> list[list[Point]]:
    """The reference split at each accepted run: each accepted run starts a level of its own."""
    levels: list[list[Point]] = [[]]
    for point in reference:
        if point.accepted is not None and levels[-1]:
            levels.append([])
        levels[-1].append(point)
    return levels
