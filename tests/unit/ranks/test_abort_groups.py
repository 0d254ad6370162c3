"""A stall is released in every process group, sub-groups included, with whatever abort this torch has."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_bench.ranks import dist as rank_dist


class _Group:
    def __init__(self, name: str, aborted: list[str]):
        self.name, self._aborted = name, aborted

    def abort(self) -> None:
        self._aborted.append(self.name)


@pytest.fixture()
def c10d(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(rank_dist._aborted, "done", False)
    return dist.distributed_c10d


def test_torchs_abort_of_the_world_is_used_where_it_exists(monkeypatch, c10d):
    calls = []
    monkeypatch.setattr(c10d, "_abort_process_group", lambda group=None: calls.append(group), raising=False)
    rank_dist.abort_all_groups()
    assert calls == [None]  # no group: torch aborts every group, inside one NCCL group call
    assert rank_dist._aborted.done  # the group is not destroyed afterwards


def test_without_it_every_group_is_aborted_newest_first(monkeypatch, c10d):
    aborted: list[str] = []
    world, split = _Group("world", aborted), _Group("split", aborted)
    monkeypatch.delattr(c10d, "_abort_process_group", raising=False)
    monkeypatch.setattr(c10d, "_world", SimpleNamespace(pg_names={world: "0", split: "1"}))
    rank_dist.abort_all_groups()
    assert aborted == ["split", "world"]


def test_nothing_to_abort_without_a_process_group(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(rank_dist._aborted, "done", False)
    rank_dist.abort_all_groups()
    assert not rank_dist._aborted.done


def test_when_torchs_abort_fails_each_group_left_is_aborted(monkeypatch, c10d):
    aborted: list[str] = []
    world = _Group("world", aborted)

    def fails(group=None):
        raise RuntimeError("only works with the NCCL backend")

    monkeypatch.setattr(c10d, "_abort_process_group", fails, raising=False)
    monkeypatch.setattr(c10d, "_world", SimpleNamespace(pg_names={world: "0"}))
    rank_dist.abort_all_groups()
    assert aborted == ["world"]
