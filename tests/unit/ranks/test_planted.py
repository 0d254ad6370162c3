"""The planted-fault seam: its grammar, and hooks that do nothing unless a fault is planted."""

from __future__ import annotations

import pytest

from nccl_bench.ranks import planted


@pytest.mark.parametrize(
    ("raw", "fault"),
    [("", None), ("corrupt", planted.Fault("corrupt")), ("stall", planted.Fault("stall")),
     ("stall:1:2", planted.Fault("stall", 1, 2)), ("stall:0:2:2.5", planted.Fault("stall", 0, 2, 2.5)),
     ("stall-gpu:0:1", planted.Fault("stall-gpu", 0, 1))],
)
def test_planted_fault_grammar(raw, fault):
    assert planted.planted_fault({planted.FAULT_ENV: raw}) == fault


@pytest.mark.parametrize("raw", ["stal", "stall:x", "stall:0:1:2:3"])
def test_a_misspelt_fault_is_refused(raw):
    with pytest.raises(ValueError, match="NCCL_BENCH_FAULT"):
        planted.planted_fault({planted.FAULT_ENV: raw})
