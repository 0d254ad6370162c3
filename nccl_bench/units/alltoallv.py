"""Uneven all-to-all: how much of each per-peer slot every rank sends, as nccl-tests' alltoallv does.

nccl-tests' alltoallv (src/alltoallv.cu) gives every (sender, receiver) pair a share in [0, 1] of
the per-peer slot (count = size / n elements): rank i sends floor(count x share[i][j]) elements to
rank j. Its size and bus bandwidth stay those of the full buffer (size = n x count x element
bytes, busbw = algbw x (n-1)/n), so a run with small shares reports less bandwidth than the links
gave; `mean_share` says how much of the size was actually sent.

The shares come from a distribution the user names, the same on every rank:
  even         every share 1 (all_to_all through the uneven path)
  random:SEED  every share uniform in [0, 1), drawn in row-major order from Python's Mersenne
               Twister seeded with SEED, so a seed names one matrix on every host and version
  skewed:HOT   ranks 0..HOT-1 are hot (as popular experts under MoE routing): every rank fills their
               slots, and sends the other peers together COLD_TO_HOT (a quarter) of that, so the
               hot ones get 80% of the data
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = ("even", "random", "skewed")
# skewed: what the cold peers get together against what the hot ones get; a quarter leaves the hot
# peers 80% of the data, as a few popular experts draw most tokens under MoE routing.
COLD_TO_HOT = 0.25
DEFAULT_SEED = 0
DEFAULT_HOT = 1

Shares = tuple[tuple[float, ...], ...]  # shares[i][j]: the part of its slot for j that rank i fills


@dataclass(frozen=True)
class Distribution:
    kind: str
    parameter: int = 0  # random: the seed; skewed: how many peers are hot; even: unused

    def __str__(self) -> str:
        return self.kind if self.kind == "even" else f"{self.kind}:{self.parameter}"


def parse_distribution(text: str) -> Distribution:
    """'even', 'random[:SEED]' or 'skewed[:HOT]'; ValueError says what is wrong."""
    kind, _, parameter = str(text).strip().lower().partition(":")
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not one of even, random[:SEED], skewed[:HOT]")
    if kind == "even":
        if parameter:
            raise ValueError("even takes no parameter")
        return Distribution("even")
    if not parameter:
        return Distribution(kind, DEFAULT_SEED if kind == "random" else DEFAULT_HOT)
    try:
        value = int(parameter)
    except ValueError:
        raise ValueError(f"{kind}'s parameter must be a whole number, got {parameter!r}") from None
    if kind == "skewed" and value < 1:
        raise ValueError(f"skewed needs at least 1 hot peer, got {value}")
    if kind == "random" and value < 0:
        raise ValueError(f"random's seed must be 0 or more, got {value}")
    return Distribution(kind, value)


def shares(distribution: Distribution, world_size: int) -> Shares:
    """The n x n matrix of shares; row i is what rank i sends."""
    n = world_size
    if distribution.kind == "random":
        draw = random.Random(distribution.parameter).random
        return tuple(tuple(draw() for _ in range(n)) for _ in range(n))
    if distribution.kind == "skewed":
        hot = min(distribution.parameter, n)
        cold = 1.0 if hot == n else hot * COLD_TO_HOT / (n - hot)
        return tuple(tuple(1.0 if j < hot else cold for j in range(n)) for _ in range(n))
    return tuple(tuple(1.0 for _ in range(n)) for _ in range(n))


def split_counts(matrix: Shares, slot_elems: int) -> tuple[tuple[int, ...], ...]:
    """Elements rank i sends rank j: floor(slot x share), as nccl-tests rounds them."""
    return tuple(tuple(int(slot_elems * share) for share in row) for row in matrix)


def mean_share(matrix: Shares) -> float:
    """The part of the nominal size that is actually sent, over all ranks."""
    return sum(map(sum, matrix)) / sum(len(row) for row in matrix)
