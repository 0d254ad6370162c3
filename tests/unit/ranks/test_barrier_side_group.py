"""--nccl-env: the tool's own barrier runs on the gloo side group, never on the variant's NCCL."""

from __future__ import annotations

import dataclasses

from nccl_bench.ranks.runner import PointRunner, TimingPlan


def test_nccl_env_barrier_and_exchanges_never_use_the_variants_group(single_rank, monkeypatch):
    """A measured op goes on when the op's own group refuses a barrier (as NCCL does for a variant that
    leaves all_reduce no algorithm): every barrier and exchange of the runner is on the side group."""
    import torch
    import torch.distributed as tdist

    side = tdist.new_group(backend="gloo")
    ctx = dataclasses.replace(single_rank, group=tdist.new_group(backend="gloo"), control=side)
    real_barrier, used = tdist.barrier, []

    def barrier(group=None, **kwargs):
        used.append(group)
        if group is not side:
            raise RuntimeError("no algorithm/protocol available for AllReduce")
        return real_barrier(group=group, **kwargs)

    monkeypatch.setattr(tdist, "barrier", barrier)
    tensor = torch.ones(4)
    measured = PointRunner(ctx, TimingPlan(warmup=1, iters=3, min_sample_s=0.0, trials=2, agg="max")).measure(
        lambda: tdist.all_reduce(tensor, group=ctx.group))
    assert measured.iters == 3 and len(measured.sample_means_us) == 2
    assert used and all(group is side for group in used)
