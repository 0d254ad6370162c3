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

Pure but for `read_overlap`, which reads one file once, as a stream.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from nccl_bench.replay.trace_events import stream_trace

_COMMUNICATION = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")  # matched at the name's start
_PROFILER_STEP = re.compile(r"ProfilerStep")

Interval = tuple[float, float]  # (start, end), microseconds on the trace's clock


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


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged where they touch or overlap, in time order."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:  # nothing of it is left (an activity rounded inward to nothing)
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def covered_us(intervals: list[Interval], cover: list[Interval]) -> float:
    """The time of `intervals` (a union) that `cover` (a union) also spans."""
    total, index = 0.0, 0
    for start, end in intervals:
        while index < len(cover) and cover[index][1] <= start:
            index += 1
        probe = index
        while probe < len(cover) and cover[probe][0] < end:
            total += min(end, cover[probe][1]) - max(start, cover[probe][0])
            probe += 1
    return total


def overlap_of(communication: Iterable[Interval], compute: Iterable[Interval]) -> Overlap:
    comm, comp = union(communication), union(compute)
    total = math.fsum(end - start for start, end in comm)
    overlapped = covered_us(comm, comp)
    return Overlap(communication_us=total, overlapped_us=overlapped, exposed_us=max(0.0, total - overlapped))


def read_overlap(path: Path | str, whole_us: bool = False) -> Overlap:
    """One rank's trace read once: its GPU activities, their launches' start times and its profiler steps;
    whole_us: each activity rounded inward to whole microseconds, as HTA does (module docstring)."""
    activities: list[tuple[str, float, float, object]] = []  # kind, start, end, correlation
    launched: dict[object, float] = {}  # correlation -> the earliest CPU-side event's start
    steps: dict[str, float] = {}  # each ProfilerStep's name -> its start
    for event in stream_trace(path):
        if event.get("ph") != "X":
            continue
        name, start, duration = event.get("name"), event.get("ts"), event.get("dur", 0)
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if not isinstance(name, str) or not _finite(start) or not _finite(duration):
            continue
        if isinstance(args.get("stream"), int) and not isinstance(args.get("stream"), bool):
            kind = kind_of(name)
            if kind in ("communication", "compute"):
                end = start + duration
                if whole_us:
                    start, end = math.ceil(start), math.floor(end)
                activities.append((kind, start, end, args.get("correlation")))
        elif "correlation" in args:
            correlation = args["correlation"]
            launched[correlation] = min(start, launched.get(correlation, math.inf))
        elif _PROFILER_STEP.search(name):
            steps[name] = start
    if len(steps) >= 2:  # the last step may be incomplete: what it launched is left out
        last = max(steps.values())
        activities = [a for a in activities if launched.get(a[3], math.inf) < last]
    return overlap_of([(s, e) for kind, s, e, _ in activities if kind == "communication"],
                      [(s, e) for kind, s, e, _ in activities if kind == "compute"])


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
