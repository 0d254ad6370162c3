"""The clocks a timed block reads: on CPU perf_counter_ns before and after every op, on GPU CUDA events
from a pool (ranks/runner.py's docstring says what each sample records and why), and the correction
that takes the events' own cost off the per-op times of the one sample that records an event per op.
"""

from __future__ import annotations

import time
from typing import Callable

from nccl_bench.units.arrivals import CUDA_EVENT_RESOLUTION_US


class CpuClock:
    """perf_counter_ns after every op (its latency) and before it (when the rank arrived at it)."""

    resolution_s = max(time.get_clock_info("perf_counter").resolution, 1e-9)
    now_ns = staticmethod(time.perf_counter_ns)

    def __init__(self, ops: int, blocking: bool, per_op: bool, events=None):
        self._stamps = [0] * (ops + 1)
        self._arrived = [0] * (ops + 1)

    def start(self) -> None:
        self._stamps[0] = self.now_ns()

    def arrive(self, index: int) -> None:
        self._arrived[index] = self.now_ns()

    def mark(self, index: int) -> None:
        self._stamps[index] = self.now_ns()

    def finish(self) -> tuple[float, list[float]]:
        stamps = self._stamps
        per_op = [(stamps[i] - stamps[i - 1]) * 1e-9 for i in range(1, len(stamps))]
        return (stamps[-1] - stamps[0]) * 1e-9, per_op

    def arrivals_ns(self) -> list[float]:
        """This rank's own clock as it called each op."""
        return self._arrived[1:]

    def in_op_s(self) -> float:
        """Seconds spent inside the ops, from each call to its return (waits for late peers included)."""
        return sum(done - came for done, came in zip(self._stamps[1:], self._arrived[1:], strict=True)) * 1e-9

    def gaps_ns(self) -> list[float]:
        """Per op, this rank's own time outside the ops before calling it: from the previous op's return
        (the sample's start for the first) to this call. Its own clock: no alignment needed."""
        return [came - left for came, left in zip(self._arrived[1:], self._stamps[:-1], strict=True)]


class EventPool:
    """CUDA timing events, created (recorded once) before any sample uses them and reused after."""

    def __init__(self, new_event: Callable[[], object], synchronize: Callable[[], None]):
        self._new_event, self.synchronize = new_event, synchronize
        self._events: list = []

    def take(self, count: int) -> list:
        while len(self._events) < count:
            event = self._new_event()
            event.record()  # torch creates the CUDA event here, outside any timed sample
            self._events.append(event)
        return self._events[:count]


class CudaClock:
    """CUDA events at the loop's ends (or after every op). The host clock is read once, as the sample
    starts on an idle stream: that is the rank's arrival; later launches are queued ahead of the GPU,
    so host stamps per op would not say when the GPU reached each op."""

    resolution_s = CUDA_EVENT_RESOLUTION_US * 1e-6
    arrive = None  # no per-op arrival: the timed loop calls no clock before each op

    def __init__(self, ops: int, blocking: bool, per_op: bool, events: EventPool):
        self._arrived_ns = 0.0
        self._total_s = 0.0
        self._synchronize = events.synchronize
        self._ops = ops
        self._blocking = blocking
        self._per_op = per_op or blocking  # --blocking synchronizes per op anyway
        self._events = events.take(ops + 1 if self._per_op else 2)

    def start(self) -> None:
        self._arrived_ns = float(time.perf_counter_ns())
        self._events[0].record()

    def mark(self, index: int) -> None:
        if self._per_op:
            self._events[index].record()
            if self._blocking:
                self._synchronize()
        elif index == self._ops:
            self._events[1].record()

    def finish(self) -> tuple[float, list[float]]:
        self._synchronize()  # elapsed_time needs both events completed
        events = self._events
        total_s = self._total_s = events[0].elapsed_time(events[-1]) * 1e-3
        if not self._per_op:
            return total_s, []
        return total_s, [events[i - 1].elapsed_time(events[i]) * 1e-3 for i in range(1, len(events))]

    def arrivals_ns(self) -> list[float]:
        return [self._arrived_ns]

    def gaps_ns(self) -> list[float]:
        """None known: the host does not see when the GPU left one op and reached the next."""
        return []

    def in_op_s(self) -> float:
        return self._total_s


def per_event_cost_s(per_op_sample_s: float, per_op_calls: int, timed_s: float, timed_calls: int) -> float:
    """What recording an event after every call added per call: the per-op sample's time per call
    above the timed samples' (which record only their two ends), never below zero."""
    if per_op_calls <= 0 or timed_calls <= 0:
        return 0.0
    return max(0.0, per_op_sample_s / per_op_calls - timed_s / timed_calls)


def without_event_cost(per_call_s: list[float], cost_s: float) -> list[float]:
    """Each call's time less the cost of the event recorded after it (never below zero)."""
    return [max(0.0, s - cost_s) for s in per_call_s]
