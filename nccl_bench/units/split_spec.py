"""How the world is cut into sub-groups that measure at once, as nccl-tests' NCCL_TESTS_SPLIT:
the grammar of the sweep's split option, read once into a value.

  node   one group per host (its ranks in rank order)
  rail   the i-th rank of every host: group i (one NIC per local rank, so one group per rail)
  mod:N  rank % N: ranks with the same remainder, as NCCL_TESTS_SPLIT="MOD N"
  div:N  rank // N: runs of N consecutive ranks, as NCCL_TESTS_SPLIT="DIV N"

ranks/split.py makes the groups from a Split and the ranks' host names.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("node", "rail", "mod", "div")
BY_HOST = ("node", "rail")  # kinds whose groups follow from the host names, and take no number


@dataclass(frozen=True)
class Split:
    kind: str  # one of KINDS
    number: int | None = None  # N of mod:N and div:N; None for node and rail

    def __str__(self) -> str:
        """The text form, as meta.json and the run's notes write it: 'node', 'mod:8'."""
        return self.kind if self.number is None else f"{self.kind}:{self.number}"


def parse_split(text: str) -> Split:
    """'node', 'rail', 'mod:N' or 'div:N' (N >= 1), in any case; ValueError says what is wrong."""
    kind, _, number = str(text).strip().lower().partition(":")
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not one of node, rail, mod:N, div:N")
    if kind in BY_HOST:
        if number:
            raise ValueError(f"{kind} takes no number")
        return Split(kind)
    try:
        value = int(number)
    except ValueError:
        raise ValueError(f"{kind} needs a whole number, as in {kind}:8") from None
    if value < 1:
        raise ValueError(f"{kind}:N needs N of at least 1, got {value}")
    return Split(kind, value)
