"""A job's communication profile: its collectives grouped by (op, size, dtype, process group), the
costliest first, with the time each took in the job and the bus bandwidth that time means (pure: traces in).

Several files, one per rank, are one job: a collective every rank calls is counted once (the count
is the largest any rank saw: ranks of a job call the same collectives, and a rank that saw fewer was
traced over a shorter window or sits in another sub-group). Ranks whose counts differ are listed in
`count_mismatches`, for the caller to warn of. The median time is over every timed call of every rank;
the total is the slowest rank's (the job waits for it); the traced window is the longest rank's.
busbw is nccl-tests' (units/bandwidth.py): the size over the median time, times the op's bus factor
at the group's size.

The replay fields stay None here; `with_replay` fills them from a replay's rows: the time of the
collective alone on the launch's ranks, its busbw, and efficiency = replayed time / time in the job
(below 1: the job took longer than the fabric needs; the rest went to overlap or placement).

How much communication ran beside compute (replay/overlap.py, replay/exposure.py): each rank's figure over
its traced window (HTA's), and each row's, its kernels against its rank's compute; the exposed time at the
replayed speed (`with_replay`) and at the speed a sweep's busbw means (`with_envelope`), per row and summed
over the rows (`Profile.exposed_at_replay`, `Profile.exposed_at_envelope`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

from nccl_bench.ranks.split import brief_ranks_text
from nccl_bench.replay.exposure import (
    WindowProjection,
    row_overlap,
    scaled_exposed_us,
    time_at_busbw_us,
    window_projection,
)
from nccl_bench.replay.overlap import Overlap
from nccl_bench.replay.replay_config import ALONE_CUDA_GRAPH, ALONE_LAUNCH_PATH
from nccl_bench.replay.replay_plan import group_label, launch_ranks
from nccl_bench.replay.trace_events import TraceError
from nccl_bench.replay.trace_reader import CollectiveCall, RankTrace
from nccl_bench.results.schema import STATUS_OK, ResultRow
from nccl_bench.units import bandwidth, op_table
from nccl_bench.units.stats import median

# (op, size_bytes, dtype, group_size, group_ranks): one row of the profile. Groups of one size are kept
# apart by their ranks (a TP group [0-3] and a DP group [0,4,8,12] run at different speeds); a group the
# trace does not name (None) is the world.
ProfileKey = tuple[str, "int | None", "str | None", "int | None", "tuple[int, ...] | None"]


@dataclass(frozen=True)
class ProfileRow:
    op: str
    size_bytes: int | None
    dtype: str | None
    group_size: int | None
    group_ranks: tuple[int, ...] | None  # the process group's global ranks; None: not named (the world)
    count: int
    total_time_us: float | None  # None: no call of this row has a time in the trace
    job_time_us: float | None  # median per call
    job_busbw_gbps: float | None
    share_of_window: float | None  # total_time_us over the traced window
    # NCCL's algorithm and protocol, only from NCCL's own record of its choice (its tuning log): a
    # trace holds none (kernel names do not say, replay/trace_vocabulary.py), so a profile has None.
    algo: str | None = None
    proto: str | None = None
    replay_time_us: float | None = None
    # with --cuda-graph, where replay_time_us is kernel time: the same collective through torch's launch path
    replay_launch_path_us: float | None = None
    replay_busbw_gbps: float | None = None
    efficiency: float | None = None  # replay_time_us / job_time_us, once replayed
    replay_flags: tuple[str, ...] = ()  # the replayed row's flags (call_bound, noisy, ...), once replayed
    overlap: Overlap | None = None  # its kernels beside compute, the most exposed rank's; None: no kernel times
    exposed_at_replay_us: float | None = None  # the exposed time at the replayed time per call
    exposed_at_envelope_us: float | None = None  # the exposed time at the time the sweep's busbw means

    @property
    def key(self) -> ProfileKey:
        return self.op, self.size_bytes, self.dtype, self.group_size, self.group_ranks

    @property
    def group_text(self) -> str:
        """The group as a line shows it: its ranks where the trace names them ('0,4,8,12'), else '-'."""
        return "-" if not self.group_ranks else brief_ranks_text(self.group_ranks)


@dataclass(frozen=True)
class CountMismatch:
    key: ProfileKey
    counts: tuple[tuple[int | None, int], ...]  # (rank, its calls of this row), one per file in order


@dataclass(frozen=True)
class Profile:
    backend: str | None
    world_size: int | None
    nccl_version: str | None
    ranks_read: tuple[int | None, ...]  # each file's rank, in the order given (None: the trace does not say)
    rows: tuple[ProfileRow, ...]  # total time, highest first
    window_us: float | None
    collective_share: float | None  # all rows' total time over the traced window (above 1 where they overlap)
    count_mismatches: tuple[CountMismatch, ...]
    overlaps: tuple[Overlap | None, ...] = ()  # each file's traced window, in the order given (None: no GPU times)
    # once replayed, the calls per CUDA graph its "alone here" times were captured in (0: call by call, through
    # torch's launch path); None: not replayed
    replay_cuda_graph: int | None = None

    @property
    def alone_here(self) -> str | None:
        """What the replayed times are (replay_config.ALONE_*); None: not replayed."""
        if self.replay_cuda_graph is None:
            return None
        return ALONE_CUDA_GRAPH if self.replay_cuda_graph else ALONE_LAUNCH_PATH

    @property
    def exposed_at_replay(self) -> WindowProjection | None:
        """The rows' exposed time at the replayed speed, summed (replay/exposure.window_projection)."""
        return window_projection([(_exposed(row), row.exposed_at_replay_us) for row in self.rows])

    @property
    def exposed_at_envelope(self) -> WindowProjection | None:
        """The rows' exposed time at the speed the sweep's busbw means, summed (as exposed_at_replay)."""
        return window_projection([(_exposed(row), row.exposed_at_envelope_us) for row in self.rows])


def profile_traces(traces: Sequence[RankTrace]) -> Profile:
    """The profile of one job's traces (one per rank); TraceError where they are not one job's."""
    _check_one_job(traces)
    calls_by_rank: list[dict[ProfileKey, list[CollectiveCall]]] = []
    for trace in traces:
        grouped: dict[ProfileKey, list[CollectiveCall]] = defaultdict(list)
        for call in trace.calls:
            grouped[_key(call)].append(call)
        calls_by_rank.append(grouped)
    windows = [trace.window_us for trace in traces if trace.window_us]
    window_us = max(windows) if windows else None
    keys = list(dict.fromkeys(key for grouped in calls_by_rank for key in grouped))
    computes = [trace.compute for trace in traces]
    rows = sorted((_row(key, [grouped.get(key, []) for grouped in calls_by_rank], computes, window_us)
                   for key in keys), key=_costliest_first)
    totals = [row.total_time_us for row in rows if row.total_time_us is not None]
    first = traces[0]
    return Profile(
        backend=first.backend, world_size=first.world_size, nccl_version=first.nccl_version,
        ranks_read=tuple(trace.rank for trace in traces), rows=tuple(rows), window_us=window_us,
        collective_share=math.fsum(totals) / window_us if window_us and totals else None,
        count_mismatches=_count_mismatches(keys, calls_by_rank, [trace.rank for trace in traces]),
        overlaps=tuple(trace.overlap if trace.overlap and trace.overlap.communication_us else None for trace in traces),
    )


def profile_json(profile: Profile) -> dict[str, Any]:
    """The profile as `--json` writes it: {"trace": {...}, "collectives": [...]}, sizes in bytes."""
    return {
        "trace": {"backend": profile.backend, "world_size": profile.world_size,
                  "nccl_version": profile.nccl_version, "ranks_read": list(profile.ranks_read),
                  "overlap": [_overlap_json(overlap) for overlap in profile.overlaps],
                  "exposed_at_replay": _projection_json(profile.exposed_at_replay),
                  "exposed_at_envelope": _projection_json(profile.exposed_at_envelope)},
        "alone_here": None if profile.alone_here is None else {
            "timing": profile.alone_here, "cuda_graph": profile.replay_cuda_graph},
        "collectives": [
            {"op": row.op, "bytes": row.size_bytes, "dtype": row.dtype, "group_size": row.group_size,
             "group_ranks": None if row.group_ranks is None else list(row.group_ranks), "count": row.count,
             "job_time_us": row.job_time_us, "job_busbw_gbps": row.job_busbw_gbps,
             "algo": row.algo, "proto": row.proto, "replay_time_us": row.replay_time_us,
             "replay_launch_path_us": row.replay_launch_path_us,
             "replay_busbw_gbps": row.replay_busbw_gbps, "efficiency": row.efficiency,
             "replay_flags": list(row.replay_flags),
             **_overlap_json(row.overlap), "exposed_at_replay_us": row.exposed_at_replay_us,
             "exposed_at_envelope_us": row.exposed_at_envelope_us}
            for row in profile.rows
        ],
    }


def with_replay(profile: Profile, rows: Sequence[ResultRow], world_size: int, cuda_graph: int = 0) -> Profile:
    """The profile with each row's replay fields from the replay's row of the same collective on the
    ranks that stood in for its group on a launch of `world_size` ranks (an op without data, barrier,
    matched by its group alone), timed with `cuda_graph` calls per CUDA graph (0: call by call); rows
    left unmatched keep None."""
    replayed = {}
    for row in rows:
        if row.status == STATUS_OK and row.time_us is not None:
            replayed[_replay_key(row.op, row.size_bytes, row.dtype, row.world_size, row.group)] = row
    filled = []
    for entry in profile.rows:
        ranks = launch_ranks(entry.group_size, entry.group_ranks, world_size)
        row = replayed.get(_replay_key(entry.op, entry.size_bytes, entry.dtype, len(ranks),
                                       group_label(ranks, world_size)))
        if row is None:
            filled.append(entry)
            continue
        efficiency = row.time_us / entry.job_time_us if entry.job_time_us else None
        filled.append(replace(entry, replay_time_us=row.time_us, replay_launch_path_us=row.launch_path_us,
                              replay_busbw_gbps=row.busbw_gbps,
                              efficiency=efficiency, replay_flags=tuple(flag for flag in row.flags.split(";") if flag),
                              exposed_at_replay_us=scaled_exposed_us(
                                  _exposed(entry), entry.job_time_us, row.time_us)))
    return replace(profile, rows=tuple(filled), replay_cuda_graph=cuda_graph)


def with_envelope(profile: Profile, sweep_rows: Sequence[ResultRow]) -> Profile:
    """The profile with each row's exposed time at the time per call that the sweep's busbw at its nearest
    size (envelope_row) means for it; None where the sweep has no such row or the row no exposed time."""
    filled = []
    for entry in profile.rows:
        swept = envelope_row(entry, sweep_rows)
        time_us = time_at_busbw_us(entry.job_time_us, entry.job_busbw_gbps, None if swept is None else swept.busbw_gbps)
        filled.append(replace(entry, exposed_at_envelope_us=scaled_exposed_us(_exposed(entry), entry.job_time_us,
                                                                               time_us)))
    return replace(profile, rows=tuple(filled))


def _exposed(entry: ProfileRow) -> float | None:
    return None if entry.overlap is None else entry.overlap.exposed_us


def _projection_json(projection: WindowProjection | None) -> dict[str, float | int] | None:
    """The rows' exposed time in the job and at the other speed (us), and how many rows each counts; null
    where no row was projected."""
    return None if projection is None else asdict(projection)


def _overlap_json(overlap: Overlap | None) -> dict[str, float | None]:
    """Communication, overlapped and exposed time (us) and the overlap in percent; nulls without GPU times."""
    if overlap is None:
        return dict.fromkeys(("communication_us", "overlapped_us", "exposed_us", "overlap_pct"))
    return {"communication_us": overlap.communication_us, "overlapped_us": overlap.overlapped_us,
            "exposed_us": overlap.exposed_us, "overlap_pct": overlap.overlap_pct}


def envelope_row(entry: ProfileRow, sweep_rows: Sequence[ResultRow]) -> ResultRow | None:
    """The sweep's measured row for the entry's op, dtype and rank count nearest its size (on a log scale:
    a sweep's sizes double); None where the sweep has no such row."""
    if entry.size_bytes is None or entry.size_bytes <= 0:
        return None
    candidates = [row for row in sweep_rows
                  if row.status == STATUS_OK and row.busbw_gbps is not None and row.size_bytes > 0
                  and (row.op, row.dtype, row.world_size) == (entry.op, entry.dtype, entry.group_size)]
    if not candidates:
        return None
    return min(candidates, key=lambda row: (abs(math.log(row.size_bytes / entry.size_bytes)), row.size_bytes))


def _key(call: CollectiveCall) -> ProfileKey:
    return call.op, call.size_bytes, call.dtype, call.group_size, call.group_ranks


def _replay_key(op: str, size_bytes: int | None, dtype: str | None, group_size: int, group: str) -> tuple:
    if not op_table.moves_data(op):
        return op, group_size, group
    return op, size_bytes, dtype, group_size, group


def _row(key: ProfileKey, calls_per_rank: list[list[CollectiveCall]], computes: list, window_us: float | None,
         ) -> ProfileRow:
    op, size_bytes, dtype, group_size, group_ranks = key
    times = [call.job_time_us for calls in calls_per_rank for call in calls if call.job_time_us is not None]
    rank_totals = [math.fsum(c.job_time_us for c in calls if c.job_time_us is not None)
                   for calls in calls_per_rank if any(c.job_time_us is not None for c in calls)]
    job_time_us = median(times) if times else None
    total_time_us = max(rank_totals) if rank_totals else None
    busbw = None
    if size_bytes is not None and group_size is not None:
        busbw = bandwidth.busbw_gbps(bandwidth.algbw_gbps(size_bytes, job_time_us),
                                     op_table.bus_factor(op, group_size))
    return ProfileRow(
        op=op, size_bytes=size_bytes, dtype=dtype, group_size=group_size, group_ranks=group_ranks,
        count=max(len(calls) for calls in calls_per_rank), total_time_us=total_time_us, job_time_us=job_time_us,
        job_busbw_gbps=busbw,
        share_of_window=total_time_us / window_us if total_time_us is not None and window_us else None,
        overlap=row_overlap([[k for call in calls for k in call.kernels] for calls in calls_per_rank], computes),
    )


def _costliest_first(row: ProfileRow) -> tuple:
    """Total time, highest first; rows without a time last; then op and size, so the order is one."""
    return (row.total_time_us is None, -(row.total_time_us or 0.0), row.op, row.size_bytes or 0, row.dtype or "")


def _count_mismatches(keys, calls_by_rank, ranks) -> tuple[CountMismatch, ...]:
    """Rows whose count differs between the ranks of its group read (a rank outside a named group calls
    none of its collectives, and is no mismatch)."""
    mismatches = []
    for key in keys:
        members = key[4]
        counts = tuple((rank, len(grouped.get(key, []))) for rank, grouped in zip(ranks, calls_by_rank, strict=True)
                       if members is None or rank is None or rank in members)
        if len({count for _, count in counts}) > 1:
            mismatches.append(CountMismatch(key, counts))
    return tuple(mismatches)


def _recorded(value: object) -> str:
    """A value a trace recorded, as a message says it; one it left out is said so, never as None."""
    return "not recorded" if value is None else repr(value)


def _check_one_job(traces: Sequence[RankTrace]) -> None:
    """Refuse files that are not one job's: none, two of one rank, or disagreeing world sizes or backends."""
    if not traces:
        raise ValueError("profile_traces needs at least one trace")
    first = traces[0]
    seen: dict[int, RankTrace] = {}
    for trace in traces:
        if trace.rank is not None and trace.rank in seen:
            raise TraceError(trace.path, f"rank {trace.rank} again: {seen[trace.rank].path} is that rank's trace too")
        if trace.rank is not None:
            seen[trace.rank] = trace
        for what in ("world_size", "backend"):
            if getattr(trace, what) != getattr(first, what):
                raise TraceError(trace.path, f"not the same job as {first.path}: its {what.replace('_', ' ')} is "
                                             f"{_recorded(getattr(trace, what))}, and that trace's is "
                                             f"{_recorded(getattr(first, what))}")
