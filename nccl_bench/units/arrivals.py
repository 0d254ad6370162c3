"""Who arrives late at a collective: clocks aligned across ranks, arrival offsets, the late-rank rule,
and nccl-tests' per-iteration spike statistics. Pure: plain numbers in, plain numbers out.

In a collective the rank that arrives late spends the least time inside it: the others wait for it.
So the rank with the longest time in the op (what --agg max reports) is a victim under a late
arriver, and the culprit is found from arrivals, on clocks the ranks share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from nccl_bench.units import stats

# A rank is named late when its figure (its gap on CPU, its aligned arrival offset elsewhere:
# late_in_sample) exceeds the median of the other ranks' by more than LATE_SIGMAS robust standard
# deviations of theirs (MAD x 1.4826): five sigmas leave a normal spread a chance below 1e-6 per
# sample to be read as lateness.
LATE_SIGMAS = 5.0
# ... and by more than this many microseconds whatever the spread: with 2 to 4 ranks the others'
# spread can be ~0 (three values, one of them the median), so a floor must stand in for it. 100 us is
# a third of the 300 us delay the rule was built to find. Measured on this 2-core host: the gaps of
# ranks not delayed stay at 4-6 us under two busy loops, the planted 300 us reads 400-440 us
# (benchmarks/RESULTS.md, "The late-rank rule's error rates on gloo").
LATE_FLOOR_US = 100.0
# ... where no gap is known (nccl-tests -I's per-process times), the latest rank also called last at
# this share of the sample's ops or more: a rank that holds the collective back is last at nearly
# every op, while a rank the scheduler held back is last at the ops where it lost its core.
LAST_SHARE = 0.9


@dataclass(frozen=True)
class ClockAlignment:
    """Each rank's clock offset from rank 0's (nanoseconds to subtract) and the offset's error (us)."""

    offsets_ns: tuple[float, ...]
    errors_us: tuple[float, ...]


def align_clocks(readings_ns: Sequence[Sequence[float]], hosts: Sequence[str]) -> ClockAlignment:
    """Clock offsets from barrier exits: readings_ns[rank][round] is each rank's clock read as it left
    the round's barrier (every rank leaves a barrier at about the same moment).

    Ranks on one host share its clock (CLOCK_MONOTONIC, which time.perf_counter_ns reads on Linux, is
    system-wide), so they get their host's offset exactly: arrivals among them are exact. Another
    host's offset is the median over rounds of its first rank's reading minus rank 0's (the median
    ignores rounds where one rank was descheduled at the exit); its error is the robust spread of
    those differences (MAD x 1.4826, Rousseeuw & Croux 1993): how far one barrier exit strays. A skew
    every exit shares (one host always released later) is not seen by it.
    """
    if len(readings_ns) != len(hosts) or not readings_ns or not readings_ns[0]:
        raise ValueError("one list of readings per rank, at least one round")
    first: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        first.setdefault(host, rank)
    offsets, errors = [], []
    for host in hosts:
        leader = first[host]
        if host == hosts[0]:
            offsets.append(0.0)
            errors.append(0.0)
            continue
        differences = [a - b for a, b in zip(readings_ns[leader], readings_ns[0], strict=True)]
        offsets.append(stats.median(differences))
        errors.append(stats.mad(differences) * stats.MAD_TO_SIGMA / 1e3)
    return ClockAlignment(tuple(offsets), tuple(errors))


def lateness_us(arrivals_ns: Sequence[float], earliest_ns: Sequence[float]) -> list[float]:
    """Per op, how long after the earliest rank this rank arrived (microseconds; aligned clocks)."""
    return [(a - e) / 1e3 for a, e in zip(arrivals_ns, earliest_ns, strict=True)]


def arrival_offset_us(lateness: Sequence[float]) -> float | None:
    """A rank's arrival offset over a sample: the median of its per-op lateness, so the few ops at
    which the scheduler held it back do not move it; None without a timed op."""
    return stats.median(lateness) if lateness else None


@dataclass(frozen=True)
class Late:
    """A rank that arrived late in every sample of a point, and by how much (median excess, us)."""

    rank: int
    excess_us: float
    samples: int  # samples judged; the rank was late in each


def late_in_sample(arrivals_us: Sequence[float], errors_us: Sequence[float],
                   last_share: Sequence[float] | None = None,
                   gaps_us: Sequence[float | None] | None = None) -> tuple[int, float] | None:
    """The rank late in one sample and how late (us), or None.

    Where gaps_us (each rank's median time outside the ops before its calls, on its own clock) is known
    for every rank: the rank with the longest gap, beyond the others' median by max(LATE_SIGMAS x
    their robust spread, LATE_FLOOR_US), late by that excess. Every rank leaves a collective at about
    the same moment, so the time it spends before the next call is how much later than the others it
    calls it, measured without aligning clocks: across hosts the alignment's error (the spread of
    barrier exits, hundreds of microseconds on a loaded host) would bury a delay of that size, and on
    a host with more ranks than cores the others' offsets scatter as widely while their gaps stay at
    the loop's few microseconds.
    Otherwise (GPU, nccl-tests): the latest rank by aligned arrival offset, beyond max(LATE_SIGMAS x the
    others' robust spread, LATE_FLOOR_US) plus the clock errors of both sides, late by its excess over
    the others' median offset; where last_share is known, also the last to call the op at LAST_SHARE
    of the sample's ops or more.
    """
    if len(arrivals_us) < 2:
        return None
    if gaps_us is not None and all(gap is not None for gap in gaps_us):
        slowest = max(range(len(gaps_us)), key=lambda r: gaps_us[r])
        extra = _excess(gaps_us, slowest)
        return (slowest, extra) if extra > _margin(gaps_us, slowest) else None
    latest = max(range(len(arrivals_us)), key=lambda r: arrivals_us[r])
    errors = errors_us[latest] + max(e for r, e in enumerate(errors_us) if r != latest)
    excess = _excess(arrivals_us, latest)
    if excess <= _margin(arrivals_us, latest) + errors:
        return None
    if last_share is not None and last_share[latest] < LAST_SHARE:
        return None
    return latest, excess


def _excess(values: Sequence[float], rank: int) -> float:
    """How far `rank`'s value exceeds the median of the other ranks'."""
    return values[rank] - stats.median([v for r, v in enumerate(values) if r != rank])


def _margin(values: Sequence[float], rank: int) -> float:
    """max(LATE_SIGMAS x the other ranks' robust spread (MAD x 1.4826), LATE_FLOOR_US)."""
    others = [v for r, v in enumerate(values) if r != rank]
    return max(LATE_SIGMAS * stats.mad(others) * stats.MAD_TO_SIGMA, LATE_FLOOR_US)


def late_rank(samples: Sequence[Sequence[float]], errors_us: Sequence[float],
              last_shares: Sequence[Sequence[float]] = (),
              gaps_us: Sequence[Sequence[float | None]] = ()) -> Late | None:
    """The rank late in every one of a point's samples (samples[s][rank] is each rank's arrival offset
    in us; last_shares[s][rank] the share of the sample's ops it called last, gaps_us[s][rank] its
    median time outside the ops), with its median excess; None when no rank was. Every sample, not
    most: a rank that holds a collective back does so in each, while the scheduler's victims change
    from sample to sample."""
    found: list[tuple[int, float]] = []
    for index, sample in enumerate(samples):
        late = late_in_sample(sample, errors_us, last_shares[index] if last_shares else None,
                              gaps_us[index] if gaps_us else None)
        if late is None or (found and late[0] != found[0][0]):
            return None
        found.append(late)
    if not found:
        return None
    return Late(found[0][0], stats.median([excess for _, excess in found]), len(found))


# cudaEventElapsedTime's resolution, about 0.5 us (CUDA runtime API): the error of each duration nccl-tests
# -I reads, where the sweep's offsets carry their clock alignment's error.
CUDA_EVENT_RESOLUTION_US = 0.5


def late_from_durations(times_us: Sequence[Sequence[float]]) -> Late | None:
    """The process late at a point from each process's time per iteration in the op (times_us[p][i]:
    nccl-tests -I's per_process_max_times_us), by late_rank's rule, the iterations as one sample.

    With no shared clock, the process that called last is the one that spent the least time: the others
    waited for it. So at each iteration a process's lateness is the longest time minus its own (as the
    sweep's is its call minus the earliest call), its arrival offset the median over the iterations, and
    its last share the share of iterations at which its time was the lowest. Late is `Late.rank` = the
    process's index in times_us.
    """
    iterations = min((len(times) for times in times_us), default=0)
    if len(times_us) < 2 or iterations == 0:
        return None
    columns = [[times[i] for times in times_us] for i in range(iterations)]
    lowest = [min(range(len(column)), key=column.__getitem__) for column in columns]
    offsets = [stats.median([max(column) - column[p] for column in columns]) for p in range(len(times_us))]
    last = [lowest.count(p) / iterations for p in range(len(times_us))]
    return late_rank([offsets], [CUDA_EVENT_RESOLUTION_US] * len(times_us), [last])


def nearest_rank_percentile(values: Sequence[float], q: int) -> float:
    """nccl-tests' -I percentile: the sorted value at index min(n-1, ceil(n*q/100)-1), the nearest-rank
    definition of its src/util.cu (percentileIndex), which may equal the maximum under 100 values."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    n = len(ordered)
    return ordered[min(n - 1, (n * q + 99) // 100 - 1)]


def cv_pct(values: Sequence[float]) -> float | None:
    """Coefficient of variation in percent, as nccl-tests -I's cv_pct: the population standard deviation
    (divided by n, src/util.cu computeIterStats) over the mean, x 100; None for no values or a zero mean."""
    if not values:
        return None
    mean = stats.mean(values)
    if mean <= 0:
        return None
    variance = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return 100.0 * math.sqrt(variance) / mean
