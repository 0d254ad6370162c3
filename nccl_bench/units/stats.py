"""Pure statistics over plain numbers; no torch, no I/O."""

from __future__ import annotations

import math
from typing import Sequence


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def percentile(values: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) with linear interpolation between order statistics.

    The same definition as numpy.percentile's default ("linear", Hyndman & Fan type 7).
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    weight = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * weight


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


# Normal-consistent MAD: MAD x 1.4826 estimates a normal sample's standard deviation (Rousseeuw & Croux 1993).
MAD_TO_SIGMA = 1.4826


def mad(values: Sequence[float]) -> float:
    """The median absolute deviation from the median: a spread that one wild value does not move."""
    center = median(values)
    return median([abs(v - center) for v in values])


def t_quantile(z: float, dof: float) -> float:
    """Student's t quantile at the normal quantile z for dof degrees of freedom (Cornish-Fisher, two
    terms; A&S 26.7.5): 4.0 at infinity, 5.07 at 19, 9.97 at 5. A spread estimated from few values
    needs this many of its sigmas to bound what the normal's z sigmas would."""
    if dof <= 0:
        return math.inf
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)


def relative_spread(low: float, high: float, center: float) -> float:
    """(high - low) / center: the trial-to-trial range as a fraction of the median."""
    if center <= 0:
        return math.inf
    return (high - low) / center


def iterations_for_sample(per_op_s: float, min_sample_s: float, min_iters: int, max_iters: int) -> int:
    """How many back-to-back ops make one timed sample last at least min_sample_s.

    Like pyperf's loop calibration: tiny messages get many iterations, huge ones few, so every
    sample is long enough for the timer and for rank skew to average out.
    """
    if min_iters < 1 or max_iters < min_iters:
        raise ValueError(f"need 1 <= min_iters <= max_iters, got {min_iters}, {max_iters}")
    if per_op_s <= 0:
        return max_iters
    needed = math.ceil(min_sample_s / per_op_s)
    return max(min_iters, min(max_iters, needed))


def combine_ranks(values: Sequence[float], how: str) -> tuple[float, int]:
    """Combine one value per rank: 'max' (the slowest rank defines a collective), 'avg' or 'min'.

    Returns the combined value and the rank that defines it (for avg: the slowest rank).
    """
    if not values:
        raise ValueError("no per-rank values")
    slowest = max(range(len(values)), key=lambda r: values[r])
    if how == "max":
        return values[slowest], slowest
    if how == "min":
        fastest = min(range(len(values)), key=lambda r: values[r])
        return values[fastest], fastest
    if how == "avg":
        return mean(values), slowest
    raise ValueError(f"unknown aggregation {how!r}")


def sweep_seconds_at_least(
    points: int, warmup: int, iters: int | None, trials: int, min_sample_s: float, op_floor_s: float
) -> float:
    """A lower bound on a sweep's duration from its counts alone, before anything runs.

    Each point runs `warmup` ops, then `trials` samples: `iters` ops each, or, with iters None
    (calibrated), samples of at least min_sample_s. No op is faster than op_floor_s.
    """
    sample_s = iters * op_floor_s if iters is not None else min_sample_s
    return points * (warmup * op_floor_s + trials * sample_s)
