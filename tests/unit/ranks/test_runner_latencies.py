"""Per-op latencies kept for p50/p99 are bounded, whatever --iters x --trials.

A real one-rank gloo process group on localhost, not a mock: the runner's barrier and cross-rank
reductions run as in a sweep.
"""

from __future__ import annotations

import datetime

import pytest

from nccl_bench.ranks import runner
from nccl_bench.ranks.dist import DistContext
from tests.helpers.ports import free_port


@pytest.fixture
def one_rank():
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    try:
        yield DistContext(0, 1, 0, "gloo", torch.device("cpu"))
    finally:
        dist.destroy_process_group()


def test_latencies_stop_at_the_cap_and_every_trial_still_counts(one_rank, monkeypatch):
    monkeypatch.setattr(runner, "MAX_KEPT_LATENCIES", 2500)
    plan = runner.TimingPlan(warmup=0, iters=1000, min_sample_s=0.0, trials=4, agg="max")
    measurement = runner.PointRunner(one_rank, plan).measure(lambda: None)
    assert len(measurement.sample_means_us) == 4  # four trials timed
    assert len(measurement.per_op_us) == 2500  # two and a half trials' latencies kept, not four
