"""Slurm's hostlist syntax: `node[01-03,07],gpu5` expanded, and host names compressed back. Pure.

The grammar is Slurm's (scontrol show hostnames / sbatch --exclude): comma-separated items, each a
name with zero or more bracket groups of comma-separated numbers or ranges `a-b`; the width of a
range's first number is kept (`[08-10]` -> node08, node09, node10); several groups multiply
(`r[1-2]n[1-2]` -> r1n1, r1n2, r2n1, r2n2). Compression joins names that differ only in a trailing
number of the same width, as Slurm prints them (node01, node02, node03 -> `node[01-03]`).
"""

from __future__ import annotations

import re
from typing import Iterable

from nccl_bench.errors import UserInputError

# A hostlist expanding past this many names is a typo (`node[1-1000000]`), not a cluster.
MAX_HOSTS = 100_000
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def _split_top(text: str, option: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise UserInputError(option, f"nested '[' in hostlist {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise UserInputError(option, f"']' without '[' in hostlist {text!r}")
        elif char == "," and depth == 0:
            items.append(text[start:at])
            start = at + 1
    if depth:
        raise UserInputError(option, f"'[' without ']' in hostlist {text!r}")
    items.append(text[start:])
    return items


def _numbers(group: str, text: str, option: str) -> list[str]:
    out: list[str] = []
    for part in group.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise UserInputError(option, f"expected numbers or ranges like 01-04 inside [...], got [{group}] "
                                         f"in hostlist {text!r}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise UserInputError(option, f"range {part} runs backwards in hostlist {text!r}")
        if last - first >= MAX_HOSTS:
            raise UserInputError(option, f"range {part} names more than {MAX_HOSTS:,} hosts")
        out.extend(str(n).zfill(len(low)) for n in range(first, last + 1))
    return out


def _expand_item(item: str, text: str, option: str) -> list[str]:
    names = [""]
    for piece in re.split(r"(\[[^\]]*\])", item):
        if piece.startswith("["):
            names = [n + number for n in names for number in _numbers(piece[1:-1], text, option)]
        else:
            names = [n + piece for n in names]
        if len(names) > MAX_HOSTS:
            raise UserInputError(option, f"hostlist {text!r} names more than {MAX_HOSTS:,} hosts")
    return names


def expand(text: str, option: str = "hostlist") -> list[str]:
    """Every host a hostlist names, in its order, each once; `option` is named in an error."""
    hosts: list[str] = []
    for item in _split_top(text.strip(), option):
        item = item.strip()
        if not item:
            raise UserInputError(option, f"empty name in hostlist {text!r}")
        hosts.extend(_expand_item(item, text, option))
    return list(dict.fromkeys(hosts))


def number_ranges(numbers: list[int], width: int = 0) -> str:
    """Sorted numbers as runs: '03,07-08' (width 2); '0-2,4-7' (width 0)."""
    parts, start = [], 0
    for at in range(1, len(numbers) + 1):
        if at == len(numbers) or numbers[at] != numbers[at - 1] + 1:
            low, high = numbers[start], numbers[at - 1]
            parts.append(str(low).zfill(width) + ("" if low == high else "-" + str(high).zfill(width)))
            start = at
    return ",".join(parts)


def compress(hosts: Iterable[str]) -> str:
    """The shortest Slurm hostlist of these hosts: `node[03,07-08]`; "" for none.

    Names sharing a prefix and a trailing number's width are joined, numbers sorted; groups keep the
    order of their first host. A number written with more digits than its width (node100 beside
    node01) is a group of its own, as Slurm keeps widths apart.
    """
    groups: dict[tuple[str, int], list[int]] = {}
    for host in dict.fromkeys(hosts):
        match = _TRAILING_NUMBER.match(host)
        if match is None:
            groups[(host, -1)] = []
        else:
            groups.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
    items = []
    for (prefix, width), numbers in groups.items():
        if width < 0:
            items.append(prefix)
        elif len(numbers) == 1:
            items.append(prefix + str(numbers[0]).zfill(width))
        else:
            items.append(f"{prefix}[{number_ranges(sorted(set(numbers)), width)}]")
    return ",".join(items)
