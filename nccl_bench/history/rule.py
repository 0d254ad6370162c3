"""The regression rule, pure: is the latest run of a series below what its history's spread allows?

The rule (docs/history.md): take the previous `window` usable runs of the series (failed runs are
never in a series' history). Their median m and MAD-sigma s (1.4826 x the median absolute deviation,
the robust standard deviation of a normal sample) give the threshold

    threshold = m - max(K_SIGMAS x s, floor x m)

and the latest run regresses when its busbw is below it. The spread term keeps a noisy machine from
raising false alarms (comparing with one previous result is what made other tools' users raise their
thresholds to 400%); the floor keeps a quiet machine, whose MAD may be 0, from flagging a 1% wobble.
K_SIGMAS is 3, as the doctor's verdicts use (docs/doctor.md). Fewer than MIN_PRIOR_RUNS previous runs
judge nothing. The window and floor are options (options.py: their defaults and why).

A step: when the latest regresses, the runs before it are walked back while each is also below the
threshold of the runs before *it*: the first of them is the run the lasting change started with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nccl_bench.units.stats import MAD_TO_SIGMA, mad, median

K_SIGMAS = 3.0
# The MAD of two runs is half their difference: no spread to trust. Three sweeps of a new series are
# recorded, the fourth is the first judged.
MIN_PRIOR_RUNS = 3

OK, REGRESSION, TOO_FEW = "ok", "regression", "too_few"


@dataclass(frozen=True)
class Point:
    run_id: str
    started_utc: str
    busbw_gbps: float


@dataclass(frozen=True)
class Verdict:
    status: str  # OK, REGRESSION or TOO_FEW
    latest: Point
    median_gbps: float | None  # of the previous runs in the window
    threshold_gbps: float | None
    step_start: Point | None = None  # the run a regression started with (the latest itself: one bad run)
    step_runs: int = 0  # runs since the change, the latest included

    @property
    def change(self) -> float | None:
        """Latest against the window's median, as a fraction (-0.5: half)."""
        if not self.median_gbps:
            return None
        return self.latest.busbw_gbps / self.median_gbps - 1


def mad_sigma(values: Sequence[float]) -> float:
    return MAD_TO_SIGMA * mad(values)


def threshold(previous: Sequence[float], floor: float, k_sigmas: float = K_SIGMAS) -> float:
    center = median(previous)
    return center - max(k_sigmas * mad_sigma(previous), floor * center)


def judge(points: Sequence[Point], window: int, floor: float) -> Verdict:
    """The latest of `points` (oldest first) against the `window` runs before it."""
    latest = points[-1]
    previous = [p.busbw_gbps for p in points[:-1][-window:]]
    if len(previous) < MIN_PRIOR_RUNS:
        return Verdict(TOO_FEW, latest, median(previous) if previous else None, None)
    limit = threshold(previous, floor)
    if latest.busbw_gbps >= limit:
        return Verdict(OK, latest, median(previous), limit)
    start = _step_start(points, window, floor)
    return Verdict(REGRESSION, latest, median(previous), limit, points[start], len(points) - start)


def _step_start(points: Sequence[Point], window: int, floor: float) -> int:
    """The earliest index from which every run is below the threshold of the runs before that index."""
    start = len(points) - 1
    while start - 1 >= MIN_PRIOR_RUNS:
        before = [p.busbw_gbps for p in points[:start - 1][-window:]]
        limit = threshold(before, floor)
        if not all(p.busbw_gbps < limit for p in points[start - 1:]):
            break
        start -= 1
    return start
