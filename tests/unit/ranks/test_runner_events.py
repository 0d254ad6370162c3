"""CUDA events are created (recorded once) before a sample's barrier, never inside the timed loop.

A unit test of the runner's call order with a fake event class, the barrier and synchronize
replaced by loggers; no process group and no GPU: torch creates a CUDA event lazily on its first
record, so a first record inside the loop would put cudaEventCreate in the measured time.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_bench.ranks import runner as runner_module
from nccl_bench.ranks.clocks import CudaClock, EventPool
from nccl_bench.ranks.runner import PointRunner, TimingPlan, captured_nothing


class FakeEvent:
    def __init__(self, log: list[str]):
        self.log, self.name = log, f"event{sum(1 for e in log if e.startswith('create'))}"
        self.log.append(f"create {self.name}")
        self.recorded = 0

    def record(self):
        self.recorded += 1
        self.log.append(f"record {self.name}")

    def elapsed_time(self, other) -> float:
        return 0.01  # ms


def _runner(log: list[str], plan: TimingPlan, monkeypatch) -> PointRunner:
    ctx = SimpleNamespace(on_gpu=False, world_size=1, rank=0)
    runner = PointRunner(ctx, plan)
    runner._clock = CudaClock  # the GPU clock, on fakes
    runner._events = EventPool(lambda: FakeEvent(log), lambda: log.append("synchronize"))
    monkeypatch.setattr(runner_module.dist, "barrier", lambda ctx: log.append("barrier"))
    monkeypatch.setattr(runner_module.dist, "synchronize", lambda ctx: log.append("synchronize"))
    return runner


@pytest.mark.parametrize("blocking", [False, True])
def test_every_event_exists_before_the_barrier_of_its_first_sample(monkeypatch, blocking):
    log: list[str] = []
    runner = _runner(log, TimingPlan(warmup=0, iters=4, min_sample_s=0.05, trials=1, agg="max",
                                     blocking=blocking), monkeypatch)
    runner._timed(lambda: log.append("op"), 4, per_op=True)
    barrier = log.index("barrier")
    created = [i for i, entry in enumerate(log) if entry.startswith("create")]
    assert len(created) == 5 and max(created) < barrier
    # before the barrier each new event is recorded once (that is when torch creates it) ...
    assert log[:barrier] == [entry for i in range(5) for entry in (f"create event{i}", f"record event{i}")]
    # ... and inside the sample only records, ops and (with --blocking) a synchronize per op
    timed = log[log.index("record event0", barrier):]
    assert not any(entry.startswith("create") for entry in timed)
    assert timed.count("op") == 4 and timed.count("synchronize") == (5 if blocking else 1)


def test_later_samples_reuse_the_pool(monkeypatch):
    log: list[str] = []
    runner = _runner(log, TimingPlan(warmup=0, iters=3, min_sample_s=0.05, trials=1, agg="max"), monkeypatch)
    runner._timed(lambda: None, 3)  # two events: the loop's ends
    runner._timed(lambda: None, 3, per_op=True)  # four: two new ones, created before its barrier
    runner._timed(lambda: None, 3)
    creates = [i for i, entry in enumerate(log) if entry.startswith("create")]
    barriers = [i for i, entry in enumerate(log) if entry == "barrier"]
    assert len(creates) == 4
    assert all(c < barriers[0] for c in creates[:2]) and all(barriers[0] < c < barriers[1] for c in creates[2:])


def test_torchs_empty_graph_warning_is_recognised():
    warn = SimpleNamespace
    assert captured_nothing([warn(message=UserWarning(
        "The CUDA Graph is empty. This usually means that the graph was attempted to be captured on wrong "
        "device or stream. (Triggered internally at /pytorch/aten/src/ATen/cuda/CUDAGraph.cpp:147.)"))])
    assert not captured_nothing([warn(message=UserWarning("something else"))])
    assert not captured_nothing([])
