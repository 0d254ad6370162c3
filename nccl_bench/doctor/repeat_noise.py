"""The noise of one doctor measurement, here and now, from control pairs measured again beside the
re-tests (doctor/schedule.controls): how far a pair that was not low lands from its first result, free
of any real difference between hosts. A re-tested low result names someone only beyond it
(doctor/verdicts.py; docs/doctor.md). Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from nccl_bench.units import stats

# Controls needed for a repeat noise: two give a shift and a spread, the spread then counted at Student's
# t for one degree of freedom (28 sigmas at 3), so they spare only what moved with them.
MIN_CONTROLS = 2
# Controls measured again beside the re-tests when the fleet has that many pairs that were not low (more
# when there are more re-tests): Student's t at 3 is 4.4 for 8, a few rounds' cost.
CONTROL_PAIRS = 8
# The sigmas of repeat noise a confirmed result must lie beyond, as the fleet's MAD_Z (verdicts.py), before
# Student's t widens them for few controls.
REPEAT_Z = 3.0


@dataclass(frozen=True)
class RepeatNoise:
    """What the controls' second measurements say: `shift`, how far the fabric as a whole moved between
    the first pass and the re-tests (log of the median ratio), and `sigma`, how far one measurement
    wanders about that (log space); from `controls` pairs."""

    shift: float
    sigma: float
    controls: int


def repeat_noise(pairs: Mapping[tuple[str, str, int], Sequence[float]], threshold: float | None) -> RepeatNoise | None:
    """The controls' noise, or None with fewer than MIN_CONTROLS: pairs measured twice whose first result
    was not low, so they were not picked for being unlucky. The difference of two measurements carries
    the noise of both, hence the square root of 2. The spread is the root mean square about the median,
    not a MAD: from a handful of controls a MAD ignores the one that moved most, and this noise may only
    ever spare a result, never name one."""
    ratios = [math.log(values[1] / values[0]) for values in pairs.values()
              if len(values) >= 2 and values[0] > 0 and values[1] > 0 and threshold is not None
              and values[0] >= threshold]
    if len(ratios) < MIN_CONTROLS:
        return None
    center = stats.median(ratios)
    spread = math.sqrt(sum((r - center) ** 2 for r in ratios) / len(ratios))
    return RepeatNoise(center, spread / math.sqrt(2), len(ratios))


def repeat_bar(median_gbps: float, noise: RepeatNoise | None, tolerance: float) -> float | None:
    """The level a re-tested result must stay below to be confirmed: the fleet's median, lowered as far
    as the controls fell (never raised: a faster fabric never makes naming easier), less Student's t
    at REPEAT_Z for the controls' count times the repeat sigma (log space); never closer than the
    tolerance, never below a tenth of the median. None without controls enough."""
    if noise is None:
        return None
    reach = stats.t_quantile(REPEAT_Z, noise.controls - 1) * noise.sigma
    share = min(max(tolerance, 1 - math.exp(-reach)), 0.9)
    return median_gbps * math.exp(min(noise.shift, 0.0)) * (1 - share)
