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
"""

from __future__ import annotations

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
    return exposed_us * time_us / job_time_us


def time_at_busbw_us(job_time_us: float | None, job_busbw_gbps: float | None,
                     busbw_gbps: float | None) -> float | None:
    """The time per call that `busbw_gbps` means for the call whose job time gave `job_busbw_gbps`: at one
    size and group, busbw is the size over the time times a constant (units/bandwidth.py)."""
    if job_time_us is None or not job_busbw_gbps or not busbw_gbps:
        return None
    return job_time_us * job_busbw_gbps / busbw_gbps
