"""The planted-fault seam: its grammar, and hooks that do nothing unless a fault is planted."""

from __future__ import annotations

import pytest

from nccl_bench.ranks import planted


@pytest.mark.parametrize(
    ("raw", "fault"),
    [("", None), ("corrupt", planted.Fault("corrupt")), ("stall", planted.Fault("stall")),
     ("stall:1:2", planted.Fault("stall", 1, 2)), ("stall:0:2:2.5", planted.Fault("stall", 0, 2, 2.5)),
     ("stall-gpu:0:1", planted.Fault("stall-gpu", 0, 1)),
     ("stall-behind-gpu:1:0", planted.Fault("stall-behind-gpu", 1, 0)), ("killed:1", planted.Fault("killed", 1)),
     ("outlive", planted.Fault("outlive")), ("crash:1:2", planted.Fault("crash", 1, 2)),
     ("late:2:300", planted.Fault("late", 2, seconds=300e-6))],
)
def test_planted_fault_grammar(raw, fault):
    assert planted.planted_fault({planted.FAULT_ENV: raw}) == fault


@pytest.mark.parametrize("raw", ["stal", "stall:x", "stall:0:1:2:3", "late", "late:2", "late:2:0", "late:-1:300",
                                 "late:2:x", "late:2:300:1"])
def test_a_misspelt_fault_is_refused(raw):
    with pytest.raises(ValueError, match="NCCL_BENCH_FAULT"):
        planted.planted_fault({planted.FAULT_ENV: raw})


def test_a_normal_run_gets_hooks_that_change_nothing():
    seam = planted.fault_seam({})
    recv = [5, 5]
    seam.point_starts(0, 1)
    seam.output_checked(recv, 0, rank=0, holder=0)
    assert type(seam) is planted.NoFaults and recv == [5, 5]
    assert seam.pause(0) is None  # the timing loop then calls nothing before each op


def test_late_pauses_its_rank_only_and_for_at_least_its_delay():
    import time

    seam = planted.fault_seam({planted.FAULT_ENV: "late:2:3000"})
    assert seam.pause(0) is None and seam.pause(1) is None
    pause = seam.pause(2)
    started = time.perf_counter()
    pause()
    assert time.perf_counter() - started >= 3e-3


def test_corrupt_flips_the_first_checked_element_on_its_holder_only():
    seam = planted.fault_seam({planted.FAULT_ENV: "corrupt"})
    held, other = [5, 5], [5, 5]
    seam.output_checked(held, 1, rank=2, holder=2)
    seam.output_checked(other, 1, rank=0, holder=2)
    seam.output_checked(other, None, rank=2, holder=2)  # nothing to verify: nothing to flip
    assert held == [5, 6] and other == [5, 5]


def test_a_stall_waits_only_at_its_rank_and_point(monkeypatch):
    stalls = []
    monkeypatch.setattr(planted, "stall", stalls.append)
    seam = planted.fault_seam({planted.FAULT_ENV: "stall:1:2:0.5"})
    for rank in (0, 1):
        for point in range(4):
            seam.point_starts(rank, point)
    assert stalls == [planted.Fault("stall", 1, 2, 0.5)]


@pytest.mark.parametrize(("kind", "waits"), [("stall-gpu", True), ("stall-behind-gpu", False)])
def test_gpu_stalls_spin_the_stream_and_only_stall_gpu_waits_for_it(monkeypatch, kind, waits):
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: calls.append(("sleep", cycles)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append(("synchronize",)))
    seam = planted.fault_seam({planted.FAULT_ENV: f"{kind}:1:0"})
    seam.point_starts(0, 0)
    assert calls == []
    seam.point_starts(1, 0)
    # stall-behind-gpu returns with the spin queued: the point's collective is enqueued behind it
    assert calls == [("sleep", planted.STALL_GPU_CYCLES)] + ([("synchronize",)] if waits else [])


def test_killed_plants_nothing_before_the_run_has_ended():
    seam = planted.fault_seam({planted.FAULT_ENV: "killed:0"})
    recv = [5, 5]
    for index in range(3):
        seam.point_starts(0, index)  # a stall here would hold the test
    seam.output_checked(recv, 0, rank=0, holder=0)
    seam.run_ended(1)  # another rank: nothing happens
    assert recv == [5, 5]


def test_the_backends_late_timeout_is_read_in_seconds_and_absent_by_default():
    assert planted.late_backend_s({}) is None
    assert planted.late_backend_s({planted.LATE_BACKEND_ENV: "1.5"}) == 1.5
    with pytest.raises(ValueError, match=planted.LATE_BACKEND_ENV):
        planted.late_backend_s({planted.LATE_BACKEND_ENV: "soon"})


def test_crash_kills_only_in_the_first_attempt(monkeypatch):
    killed = []
    monkeypatch.setattr(planted.os, "kill", lambda pid, sig: killed.append(sig))
    seam = planted.fault_seam({planted.FAULT_ENV: "crash:1:2"})
    for attempt, expected in (("1", []), ("0", [planted.signal.SIGKILL])):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", attempt)
        seam.point_starts(0, 2)  # another rank
        seam.point_starts(1, 1)  # another point
        seam.point_starts(1, 2)
        assert killed == expected


def test_outlive_waits_on_its_rank_only_until_the_others_here_have_ended(monkeypatch):
    monkeypatch.setattr(planted.time, "sleep", lambda seconds: None)
    seam = planted.fault_seam({planted.FAULT_ENV: "outlive:1"})
    running = iter([True, True, False])
    seam.last_lines_due(0, lambda: pytest.fail("another rank must not wait"))
    seam.last_lines_due(1, lambda: next(running))
    assert next(running, "all asked") == "all asked"
    planted.NoFaults().last_lines_due(1, lambda: pytest.fail("a normal run must not wait"))


def test_outlive_gives_up_on_a_rank_that_never_ends(monkeypatch):
    slept = []
    monkeypatch.setattr(planted.time, "sleep", slept.append)
    planted.fault_seam({planted.FAULT_ENV: "outlive"}).last_lines_due(0, lambda: True)
    assert sum(slept) == pytest.approx(planted.OUTLIVE_WAIT_S)
