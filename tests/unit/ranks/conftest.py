"""Fixtures of the rank-side unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def single_rank(tmp_path):
    import torch
    import torch.distributed as tdist

    from nccl_bench.ranks.dist import DistContext

    tdist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield DistContext(0, 1, 0, "gloo", torch.device("cpu"))
    finally:
        tdist.destroy_process_group()
