"""How much of one rank's communication ran beside compute, and how much was exposed, over its traced window
(HTA's `get_comm_comp_overlap` definition, HolisticTraceAnalysis 0.5.0, hta/analyzers/communication_analysis.py
and hta/utils/utils.py; the facts, not its code).

The definition, per rank (one trace file), all CUDA streams together:

- The GPU activities are the events that name a CUDA `stream` (kernels, memcpys, memsets). Communication
  is a kernel whose name matches `^nccl.*Kernel`; memory is a name starting `Memcpy`, `Memset` or `dma`;
  compute is every other activity whose name neither contains `Memcpy` or `Sync` nor starts `Memset`.
- Where the trace holds two or more `ProfilerStep#N` steps, only the activities launched before the last
  step began count (HTA drops the last, possibly incomplete, step): those whose `correlation` names a CPU-side
  event (the launch) that starts before it.
- HTA 0.5.0 rounds every event of a trace with fractional (nanosecond-resolution) times inward to whole
  microseconds (start up, end down; hta/common/trace_parser.py, after pytorch/pytorch#122425). Here the
  times are the trace's own unless `whole_us` asks for HTA's rounding: on the 2-GPU fixture the rounding
  takes 1.8 ms of 76.9 ms off the compute union, and HTA's figure is 14.31% where the trace's times give
  14.76%.
- Each class's intervals are merged into their union. Overlapped communication is the time in both unions;
  exposed communication the time in the communication union outside the compute union; the overlap figure
  is overlapped / communication time (HTA's `comp_comm_overlap_pctg`, in percent).

Pure but for `read_overlap`, which reads one file once, as a stream; the trace reader gathers the same
activities in its own one pass (ActivityScan).
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice, pairwise
from pathlib import Path

from nccl_bench.replay.trace_events import stream_trace

_COMMUNICATION = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")  # matched at the name's start
_PROFILER_STEP = re.compile(r"ProfilerStep")

Interval = tuple[float, float]  # (start, end), microseconds on the trace's clock
# Runs of ascending activities merged one by one, with a heap entry each: past this many a sort of the indices
# takes less memory (an int and a key per activity against a heap entry and an iterator per run).
MERGED_RUNS = 1024


@dataclass(frozen=True)
class Overlap:
    """One rank's communication over its traced window, in microseconds."""

    communication_us: float  # the union of its communication kernels
    overlapped_us: float  # of which compute kernels ran at the same time
    exposed_us: float  # of which no compute kernel ran

    @property
    def overlap_pct(self) -> float | None:
        """Overlapped over communication time, in percent (HTA's figure); None without communication."""
        return 100 * self.overlapped_us / self.communication_us if self.communication_us > 0 else None


def kind_of(name: str) -> str:
    """communication, memory, compute or other: HTA's classes of a GPU activity's name (module docstring)."""
    if _COMMUNICATION.match(name):
        return "communication"
    if _MEMORY.match(name):
        return "memory"
    return "other" if _NOT_COMPUTE.match(name) else "compute"


class Intervals(Sequence[Interval]):
    """Intervals in time order, each apart from the next (a union), held as two arrays of floats: no object per
    interval. Equal to any sequence of the same (start, end) pairs."""

    __slots__ = ("starts", "ends")

    def __init__(self, starts: array | None = None, ends: array | None = None):
        self.starts = array("d") if starts is None else starts
        self.ends = array("d") if ends is None else ends

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Intervals(self.starts[index], self.ends[index])
        return self.starts[index], self.ends[index]

    def __iter__(self) -> Iterator[Interval]:
        return zip(self.starts, self.ends, strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == len(self) and all(tuple(pair) == mine for pair, mine in zip(other, self, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Intervals({list(self)!r})"


def union(intervals: Iterable[Interval]) -> Intervals:
    """The intervals merged where they touch or overlap, in time order."""
    if isinstance(intervals, Intervals):  # a union already
        return intervals
    starts, ends = array("d"), array("d")
    for start, end in intervals:
        starts.append(start)
        ends.append(end)
    return _merged(starts, ends)


def _merged(starts: array, ends: array, kept: bytearray | None = None) -> Intervals:
    """The union of the intervals (starts[i], ends[i]), of those whose kept[i] is set where kept is given."""
    merged = Intervals()
    merged_starts, merged_ends = merged.starts, merged.ends
    for index in ascending_order(starts):
        start, end = starts[index], ends[index]
        if kept is not None and not kept[index]:
            continue
        if end <= start:  # nothing of it is left (an activity rounded inward to nothing)
            continue
        if merged_ends and start <= merged_ends[-1]:
            if end > merged_ends[-1]:
                merged_ends[-1] = end
        else:
            merged_starts.append(start)
            merged_ends.append(end)
    return merged


def ascending_order(values: array) -> Iterator[int]:
    """The indices of `values` in ascending order of their values. A trace's activities ascend but for a few
    steps back (one per stream or section): the runs in which they ascend are merged, without an object per
    activity; past MERGED_RUNS runs, the indices are sorted."""
    steps_back = list(islice((index for index in range(1, len(values)) if values[index] < values[index - 1]),
                             MERGED_RUNS))
    if len(steps_back) >= MERGED_RUNS:
        return iter(sorted(range(len(values)), key=values.__getitem__))
    runs = [range(start, end) for start, end in pairwise([0, *steps_back, len(values)])]
    return iter(runs[0]) if len(runs) == 1 else heapq.merge(*runs, key=values.__getitem__)


def covered_us(intervals: Intervals, cover: Intervals) -> float:
    """The time of `intervals` (a union) that `cover` (a union) also spans."""
    total, index = 0.0, 0
    cover_starts, cover_ends = cover.starts, cover.ends
    for start, end in intervals:
        while index < len(cover_ends) and cover_ends[index] <= start:
            index += 1
        probe = index
        while probe < len(cover_ends) and cover_starts[probe] < end:
            total += min(end, cover_ends[probe]) - max(start, cover_starts[probe])
            probe += 1
    return total


def overlap_of(communication: Iterable[Interval], compute: Iterable[Interval]) -> Overlap:
    comm, comp = union(communication), union(compute)
    total = math.fsum(end - start for start, end in comm)
    overlapped = covered_us(comm, comp)
    return Overlap(communication_us=total, overlapped_us=overlapped, exposed_us=max(0.0, total - overlapped))


def read_overlap(path: Path | str, whole_us: bool = False) -> Overlap:
    """One rank's trace read once, its overlap over the traced window; whole_us: each activity rounded inward
    to whole microseconds, as HTA does (module docstring)."""
    scan = ActivityScan(whole_us)
    for event in stream_trace(path):
        scan.add(event)
    return scan.overlap()


class ActivityScan:
    """One rank's GPU activities, their launches' start times and its profiler steps, gathered event by event
    (the trace reader hands it each event of its one pass); whole_us: HTA's rounding (module docstring).

    What grows with the trace's kernels is held in arrays, never as an object per kernel or launch: each
    communication and compute activity's start, end and correlation, and each launch's correlation and
    start. A correlation that is not an integer (Kineto's are) names no launch."""

    def __init__(self, whole_us: bool = False):
        self.whole_us = whole_us
        self.communication = _Activities()
        self.compute_activities = _Activities()
        self.launch_correlations = array("q")  # each CPU-side event with a correlation (a launch), in file order
        self.launch_starts = array("d")
        self.steps: dict[str, float] = {}  # each ProfilerStep's name -> its start

    def add(self, event: dict) -> None:
        if event.get("ph") != "X":
            return
        name, start, duration = event.get("name"), event.get("ts"), event.get("dur", 0)
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if not isinstance(name, str) or not _finite(start) or not _finite(duration):
            return
        if isinstance(args.get("stream"), int) and not isinstance(args.get("stream"), bool):
            kind = kind_of(name)
            if kind in ("communication", "compute"):
                end = start + duration
                if self.whole_us:
                    start, end = math.ceil(start), math.floor(end)
                activities = self.communication if kind == "communication" else self.compute_activities
                activities.add(start, end, _correlation(args.get("correlation")))
        elif "correlation" in args:
            correlation = _correlation(args["correlation"])
            if correlation != NO_CORRELATION:
                self.launch_correlations.append(correlation)
                self.launch_starts.append(start)
        elif _PROFILER_STEP.search(name):
            self.steps[name] = start

    def overlap(self) -> Overlap:
        """The overlap over the traced window: where the trace holds two or more profiler steps, what the last
        one launched is left out (it may be incomplete)."""
        if len(self.steps) < 2:
            return overlap_of(self.communication.union(), self.compute())
        launched = self._launched_before(max(self.steps.values()))
        return overlap_of(self.communication.union(launched), self.compute_activities.union(launched))

    def compute(self) -> Intervals:
        """The union of every compute activity of the trace, the last step's too (what a collective's own
        kernels are set against, wherever in the trace they ran)."""
        return self.compute_activities.union()

    def _launched_before(self, last: float) -> array:
        """The correlations of the launches that started before `last`, ascending (for a binary search)."""
        launches = zip(self.launch_correlations, self.launch_starts, strict=True)
        before = array("q", (correlation for correlation, start in launches if start < last))
        in_order = all(before[index - 1] <= before[index] for index in range(1, len(before)))
        return before if in_order else array("q", sorted(before))


NO_CORRELATION = -(2**63)  # held for an activity whose correlation is not an integer, or is out of range


class _Activities:
    """One class's activities as read: start, end and correlation (NO_CORRELATION where none) in arrays."""

    def __init__(self):
        self.starts, self.ends, self.correlations = array("d"), array("d"), array("q")

    def add(self, start: float, end: float, correlation: int) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.correlations.append(correlation)

    def union(self, launched: array | None = None) -> Intervals:
        """Their union; where `launched` (ascending correlations) is given, of those whose launch is in it."""
        if launched is None:
            return _merged(self.starts, self.ends)
        kept = bytearray(_holds(launched, correlation) for correlation in self.correlations)
        return _merged(self.starts, self.ends, kept)


def _holds(ascending: array, value: int) -> bool:
    index = bisect.bisect_left(ascending, value)
    return index < len(ascending) and ascending[index] == value


def _correlation(value: object) -> int:
    """A correlation as an array holds it: an integer within 64 bits, else NO_CORRELATION."""
    if isinstance(value, int) and not isinstance(value, bool) and NO_CORRELATION < value < 2**63:
        return value
    return NO_CORRELATION


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
