"""How much of each collective's time in the job ran beside compute and how much was exposed, and what the
exposed time would become at another speed (pure: intervals and numbers in, numbers out).

A profile row's figures, on each rank read: the union of its calls' NCCL kernels (their own intervals,
every call of the trace) set against the union of that rank's compute kernels, as replay/overlap.py sets a
window's communication against it (overlapped: both ran; exposed: no compute ran). Of several ranks the
row shows the most exposed one's, as its total is the slowest rank's: the job waits for that rank.

At another time per call (the replay's, or the time the sweep's busbw means at the row's size), each
call keeps the share of its time that compute hid: the schedule, not the fabric, decides where a
collective sits among compute kernels, so exposed x time / job_time. That is the exposed time's own
scale; it does not claim that a faster collective would slip under compute it did not meet.

The traced window's exposed time at another speed (`window_projection`) is the sum of the rows' own
projections: each collective scaled as above, each call keeping the share compute hid, and a row without a
figure at that speed (not replayed, no envelope row) counted at its exposed time in the job. It sits beside
the same rows' exposed time in the job, summed, not beside the window's exposed figure (overlap.py): the rows
count every call of the trace and each row is its most exposed rank's, where the window leaves out the
last profiler step and is one rank's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from nccl_bench.replay.overlap import Interval, Overlap, overlap_of


def row_overlap(kernels_per_rank: Sequence[Sequence[Interval]],
                compute_per_rank: Sequence[Sequence[Interval]]) -> Overlap | None:
    """The most exposed rank's overlap of one row (module docstring); None where no rank holds its kernels."""
    found = [overlap_of(kernels, compute)
             for kernels, compute in zip(kernels_per_rank, compute_per_rank, strict=True) if kernels]
    return most_exposed(found)


def most_exposed(overlaps: Sequence[Overlap | None]) -> Overlap | None:
    """The overlap with the most exposed time, the first of equals; None where there is none."""
    return max((overlap for overlap in overlaps if overlap is not None), key=lambda o: o.exposed_us, default=None)


def scaled_exposed_us(exposed_us: float | None, job_time_us: float | None, time_us: float | None) -> float | None:
    """The exposed time at `time_us` per call instead of the job's `job_time_us` (module docstring)."""
    if exposed_us is None or time_us is None or not job_time_us:
        return None
    scaled = exposed_us * time_us / job_time_us
    return scaled if math.isfinite(scaled) else None


def time_at_busbw_us(job_time_us: float | None, job_busbw_gbps: float | None,
                     busbw_gbps: float | None) -> float | None:
    """The time per call that `busbw_gbps` means for the call whose job time gave `job_busbw_gbps`: at one
    size and group, busbw is the size over the time times a constant (units/bandwidth.py)."""
    if job_time_us is None or not job_busbw_gbps or not busbw_gbps:
        return None
    return job_time_us * job_busbw_gbps / busbw_gbps


@dataclass(frozen=True)
class WindowProjection:
    """The rows' exposed time in the job and at another speed (module docstring), microseconds."""

    job_us: float  # every row's exposed time in the job, summed
    projected_us: float  # the same rows, each at its projection, or at its job value where it has none
    rows: int  # rows with an exposed time
    projected_rows: int  # of them, rows with a projection


def window_projection(rows: Sequence[tuple[float | None, float | None]]) -> WindowProjection | None:
    """(exposed_us in the job, exposed_us at the other speed) per row -> the sums of both over the rows with an
    exposed time, a row without a projection at its job value; None where no row has both (nothing projected)
    or a sum is not finite."""
    kept = [(exposed, exposed if projected is None else projected) for exposed, projected in rows
            if exposed is not None]
    projected_rows = sum(1 for exposed, projected in rows if exposed is not None and projected is not None)
    if not projected_rows:
        return None
    try:
        job_us, projected_us = math.fsum(job for job, _ in kept), math.fsum(at for _, at in kept)
    except OverflowError:  # fsum's own word for a sum past a float
        return None
    if not (math.isfinite(job_us) and math.isfinite(projected_us)):
        return None
    return WindowProjection(job_us, projected_us, len(kept), projected_rows)
