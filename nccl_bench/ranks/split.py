"""The sweep's sub-groups: the world cut as a Split says (units/split_spec.py), as nccl-tests'
NCCL_TESTS_SPLIT. On 2 hosts x 8 ranks, node = div:8 (ranks 0-7 and 8-15) and rail = mod:8
(ranks {0, 8}, {1, 9}, ...).

Pure: the groups follow from the split and every rank's host name, the same on every rank. Every
group must have the same size (the sizes of split ops are rounded to it before the run) and at
least 2 ranks (a group of one crosses no link).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nccl_bench.units.split_spec import Split

# A line that names a group's ranks lists at most this many (a rail of 64 hosts has 64 ranks); a longer
# list keeps its first and last ranks and says how many there are.
BRIEF_RANKS = 8


@dataclass(frozen=True)
class Group:
    name: str  # the `group` column: "node h2", "rail 1", "rank%8=3", "rank/8=1"
    ranks: tuple[int, ...]  # global ranks in rank order; a rank's index here is its rank in the group


def _colours(split: Split, hostnames: list[str]) -> list[tuple[str, int]]:
    """Each rank's group name and its order among groups."""
    number = split.number
    if split.kind == "mod":
        return [(f"rank%{number}={rank % number}", rank % number) for rank in range(len(hostnames))]
    if split.kind == "div":
        return [(f"rank/{number}={rank // number}", rank // number) for rank in range(len(hostnames))]
    hosts = list(dict.fromkeys(hostnames))  # in order of first rank
    if split.kind == "node":
        return [(f"node {host}", hosts.index(host)) for host in hostnames]
    seen: dict[str, int] = {}
    colours = []
    for host in hostnames:
        index = seen[host] = seen.get(host, -1) + 1
        colours.append((f"rail {index}", index))
    return colours


def ranks_text(ranks: tuple[int, ...]) -> str:
    """'2-5' for a run of more than two consecutive ranks, else '0,2': how a group's ranks are written."""
    return f"{ranks[0]}-{ranks[-1]}" if _one_run(ranks) else ",".join(map(str, ranks))


def brief_ranks_text(ranks: tuple[int, ...]) -> str:
    """ranks_text cut to fit a line: past BRIEF_RANKS ranks that are not one run, the first few and the
    last two, with the count ('0,8,16,...,496,504 (64 ranks)')."""
    if _one_run(ranks) or len(ranks) <= BRIEF_RANKS:
        return ranks_text(ranks)
    head, tail = ranks[:3], ranks[-2:]
    return f"{','.join(map(str, head))},...,{','.join(map(str, tail))} ({len(ranks)} ranks)"


def _one_run(ranks: tuple[int, ...]) -> bool:
    """More than two ranks, each the one before plus 1."""
    return len(ranks) > 2 and list(ranks) == list(range(ranks[0], ranks[0] + len(ranks)))


def groups(split: Split, hostnames: list[str]) -> list[Group]:
    """The groups of `split` over ranks whose hosts are `hostnames` (index = rank), in group order."""
    found: dict[tuple[int, str], list[int]] = {}
    for rank, (name, order) in enumerate(_colours(split, hostnames)):
        found.setdefault((order, name), []).append(rank)
    return [Group(name, tuple(ranks)) for (_, name), ranks in sorted(found.items())]


def group_size(split: Split, world_size: int, ranks_per_host: int) -> int:
    """The size every group has, known before the run; ValueError when sizes would differ or be 1."""
    step = split.number if split.number is not None else ranks_per_host  # mod/div: N; node/rail: ranks per host
    if world_size % step:
        if split.number is None:
            raise ValueError(f"{world_size} ranks at {ranks_per_host} per host leave hosts of different sizes")
        raise ValueError(f"{split} on {world_size} ranks makes groups of different sizes")
    size = world_size // step if split.kind in ("mod", "rail") else step
    if size < 2:
        raise ValueError(f"{split} on {world_size} ranks makes groups of 1 rank, which cross no link")
    return size


def check_sizes(found: list[Group], size: int, split: Split) -> None:
    """The groups the hosts gave have the size the plan was made for; ValueError names the sizes."""
    sizes = sorted({len(group.ranks) for group in found})
    if sizes != [size]:
        listed = ", ".join(f"{group.name}: {len(group.ranks)}" for group in found)
        raise ValueError(f"{split} gives groups of {' and '.join(map(str, sizes))} "
                         f"ranks ({listed}); the sizes were planned for groups of {size}: every host must run "
                         "as many ranks")


def hosts_of_group(name: str, hostnames: list[str]) -> tuple[str, ...]:
    """The hosts whose ranks made up the group called `name` (a row's `group` column) among ranks on
    `hostnames` (index = rank), in rank order; () when no split of these ranks makes such a group. The name
    says its split: 'node h2' and 'rail 1' by host, 'rank%8=3' mod:8, 'rank/8=1' div:8."""
    by_number = re.fullmatch(r"rank([%/])(\d+)=\d+", name)
    if by_number:
        split = Split("mod" if by_number.group(1) == "%" else "div", int(by_number.group(2)))
    else:
        split = Split(name.partition(" ")[0]) if name.partition(" ")[0] in ("node", "rail") else None
    if split is None or split.number == 0:
        return ()
    for group in groups(split, hostnames):
        if group.name == name:
            return tuple(dict.fromkeys(hostnames[rank] for rank in group.ranks))
    return ()
