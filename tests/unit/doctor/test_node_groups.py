"""The doctor's per-host groups time out as the default group does, not after torch's 30 minutes."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

from nccl_bench.doctor.doctor_body import _Doctor
from nccl_bench.ranks.dist import DistContext


def test_every_host_group_gets_the_default_groups_timeout(monkeypatch):
    import torch.distributed as tdist

    made = []
    monkeypatch.setattr(tdist, "new_group", lambda ranks, timeout=None: made.append((ranks, timeout)) or object())
    mine = SimpleNamespace(ranks=(2, 3))
    doctor = SimpleNamespace(nodes=[SimpleNamespace(ranks=(0, 1)), mine, SimpleNamespace(ranks=(4,))], my_node=mine,
                             ctx=DistContext(2, 5, 0, "gloo", "cpu", group_timeout_s=8.0))
    assert _Doctor._node_group(doctor) is not None
    assert made == [([0, 1], datetime.timedelta(seconds=8)), ([2, 3], datetime.timedelta(seconds=8))]
    assert DistContext(0, 1, 0, "gloo", "cpu").group_timeout() is None
