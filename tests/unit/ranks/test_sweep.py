"""The sweep's %peak reference: none for one rank (it crosses no link), a given --peak kept."""

from __future__ import annotations

from types import SimpleNamespace

from nccl_bench.config import SweepConfig
from nccl_bench.ranks import sweep


def test_one_rank_has_no_detected_peak_but_a_given_one_is_kept():
    ctx = SimpleNamespace(world_size=1, rank=0)
    assert sweep.reference_peak(SweepConfig(), ctx, 1) == (None, sweep.NO_PEAK_ONE_RANK)
    assert sweep.reference_peak(SweepConfig(peak_gbps=450.0), ctx, 1) == (450.0, "450 GB/s (given with --peak)")
