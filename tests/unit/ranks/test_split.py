"""The split's groups: nccl-tests' MOD/DIV meanings, hosts and rails, and the sizes refused before a run."""

from __future__ import annotations

import pytest

from nccl_bench.ranks import split
from nccl_bench.units.split_spec import parse_split

TWO_BY_EIGHT = ["a"] * 8 + ["b"] * 8  # 2 hosts x 8 ranks


def _ranks(found):
    return {group.name: group.ranks for group in found}


def _groups(text, hostnames):
    return split.groups(parse_split(text), hostnames)


def test_on_2x8_ranks_node_is_div_8_and_rail_is_mod_8():
    assert _ranks(_groups("node", TWO_BY_EIGHT)) == {"node a": tuple(range(8)), "node b": tuple(range(8, 16))}
    assert list(_ranks(_groups("div:8", TWO_BY_EIGHT)).values()) == [tuple(range(8)), tuple(range(8, 16))]
    rails = _groups("rail", TWO_BY_EIGHT)
    assert [g.ranks for g in rails] == [(i, i + 8) for i in range(8)] == [g.ranks for g in _groups("mod:8",
                                                                                                   TWO_BY_EIGHT)]
    assert [g.name for g in rails][:2] == ["rail 0", "rail 1"]
    assert [g.name for g in _groups("mod:8", TWO_BY_EIGHT)][:2] == ["rank%8=0", "rank%8=1"]


def test_rails_follow_each_host_s_rank_order_even_when_hosts_interleave():
    assert _ranks(_groups("rail", ["a", "b", "a", "b"])) == {"rail 0": (0, 1), "rail 1": (2, 3)}
    assert _ranks(_groups("node", ["a", "b", "a", "b"])) == {"node a": (0, 2), "node b": (1, 3)}


@pytest.mark.parametrize("how, world, per_host, size", [
    ("node", 16, 8, 8), ("rail", 16, 8, 2), ("mod:8", 16, 8, 2), ("div:8", 16, 8, 8), ("div:2", 4, 1, 2),
])
def test_group_sizes_known_before_the_run(how, world, per_host, size):
    assert split.group_size(parse_split(how), world, per_host) == size


@pytest.mark.parametrize("how, world, per_host, problem", [
    ("mod:3", 4, 4, "mod:3 on 4 ranks makes groups of different sizes"),
    ("div:3", 4, 4, "div:3 on 4 ranks makes groups of different sizes"),
    ("node", 4, 1, "node on 4 ranks makes groups of 1 rank, which cross no link"),
    ("node", 5, 2, "5 ranks at 2 per host leave hosts of different sizes"),
])
def test_unequal_or_single_rank_groups_are_refused(how, world, per_host, problem):
    with pytest.raises(ValueError, match=problem):
        split.group_size(parse_split(how), world, per_host)


def test_hosts_that_differ_from_the_plan_are_named():
    with pytest.raises(ValueError, match=r"groups of 1 and 2 ranks \(node a: 2, node b: 1\)"):
        split.check_sizes(_groups("node", ["a", "a", "b"]), 2, parse_split("node"))



@pytest.mark.parametrize("ranks, text", [
    ((0, 1), "0,1"), ((2, 3, 4, 5), "2-5"), (tuple(range(0, 64, 8)), "0,8,16,24,32,40,48,56"),
    (tuple(range(0, 72, 8)), "0,8,16,...,56,64 (9 ranks)"), (tuple(range(100)), "0-99"),
])
def test_a_long_list_of_ranks_is_cut_to_its_first_and_last(ranks, text):
    assert split.brief_ranks_text(ranks) == text
    assert split.ranks_text(ranks) == (text if len(ranks) <= split.BRIEF_RANKS or "-" in text
                                       else ",".join(map(str, ranks)))


@pytest.mark.parametrize("name,hosts", [
    ("node h2", ("h2",)), ("rail 1", ("h1", "h2")), ("rank%2=0", ("h1", "h2")), ("rank/2=1", ("h2",)),
    ("rank/4=0", ("h1", "h2")), ("node h9", ()), ("rank%0=0", ()), ("world", ()),
])
def test_the_hosts_of_a_group_follow_from_its_name(name, hosts):
    assert split.hosts_of_group(name, ["h1", "h1", "h2", "h2"]) == hosts
