"""Sub-groups are made one way: every group by every rank, in order, each a set-up step named with its ranks."""

from __future__ import annotations

import datetime
import inspect

import pytest

from nccl_bench.ranks import dist
from nccl_bench.ranks.dist import DistContext, SetUpWatch, group_step, make_groups
from nccl_bench.ranks.set_up import SetUp


class _Steps:
    def __init__(self):
        self.said: list[str] = []

    def step(self, where: str) -> None:
        self.said.append(where)


@pytest.fixture
def made(monkeypatch):
    """Every new_group call, as (ranks, backend); a handle named after them is returned."""
    import torch.distributed as tdist

    calls: list[tuple[list[int], str | None, datetime.timedelta | None]] = []

    def new_group(ranks, timeout=None, backend=None):
        calls.append((ranks, backend, timeout))
        return f"{backend or 'default'}:{ranks}"

    monkeypatch.setattr(tdist, "new_group", new_group)
    return calls


@pytest.mark.parametrize("index, count, ranks, label", [
    (0, 1, (0, 1), "making sub-group 1 of 1 (ranks 0,1)"),
    (1, 2, (4, 5, 6, 7), "making sub-group 2 of 2 (ranks 4-7)"),
    (2, 8, (2, 10), "making sub-group 3 of 8 (ranks 2,10)"),
    (0, 8, tuple(range(0, 64, 8)), "making sub-group 1 of 8 (ranks 0,8,16,24,32,40,48,56)"),
    (7, 8, tuple(range(7, 512, 8)), "making sub-group 8 of 8 (ranks 7,15,23,...,503,511 (64 ranks))"),
    (0, 1, tuple(range(64)), "making sub-group 1 of 1 (ranks 0-63)"),
])
def test_each_group_s_step_names_its_place_and_its_ranks(index, count, ranks, label):
    assert group_step(index, count, ranks) == label


def test_every_rank_makes_every_group_in_order_and_keeps_its_own(made):
    steps = _Steps()
    ctx = DistContext(5, 8, 1, "gloo", "cpu", group_timeout_s=8.0, set_up=steps)
    groups = make_groups(ctx, [(0, 1, 2, 3), (4, 5, 6, 7), (1, 5), (0, 1, 2, 3)])
    timeout = datetime.timedelta(seconds=8)
    assert made == [([0, 1, 2, 3], None, timeout), ([4, 5, 6, 7], None, timeout), ([1, 5], None, timeout)]
    assert steps.said == ["making sub-group 1 of 3 (ranks 0-3)", "making sub-group 2 of 3 (ranks 4-7)",
                          "making sub-group 3 of 3 (ranks 1,5)"]
    assert list(groups) == [(4, 5, 6, 7), (1, 5)]
    assert (groups[(4, 5, 6, 7)].rank, groups[(4, 5, 6, 7)].world_size) == (1, 4)
    assert (groups[(1, 5)].rank, groups[(1, 5)].world_size, groups[(1, 5)].group) == (1, 2, "default:[1, 5]")


def test_a_rank_in_no_group_still_makes_them_all_and_gets_none(made):
    groups = make_groups(DistContext(4, 5, 0, "gloo", "cpu"), [(0, 1), (2, 3)])
    assert groups == {} and [ranks for ranks, _, _ in made] == [[0, 1], [2, 3]]


def test_a_world_with_a_gloo_side_group_gives_each_group_one(made):
    ctx = DistContext(1, 2, 1, "nccl", "cpu", control="side")
    [mine] = make_groups(ctx, [(0, 1)]).values()
    assert [(ranks, backend) for ranks, backend, _ in made] == [([0, 1], None), ([0, 1], "gloo")]
    assert (mine.group, mine.control) == ("default:[0, 1]", "gloo:[0, 1]")


def test_the_set_up_watch_is_what_the_process_group_asks_of_it():
    """ranks/set_up.SetUp has every method of dist.SetUpWatch, with the same parameters."""
    wanted = {name: member for name, member in vars(SetUpWatch).items()
              if inspect.isfunction(member) and not name.startswith("_")}
    assert {"step", "start", "join_store", "close"} <= set(wanted)
    for name, member in wanted.items():
        assert list(inspect.signature(getattr(SetUp, name)).parameters) == list(
            inspect.signature(member).parameters), name
    assert dist.DistContext.__dataclass_fields__["set_up"].type == "SetUpWatch | None"
