"""Which nodes exchange data in which round: pure, deterministic, no torch.

A round is a list of node pairs (indices into the node list) in which no node appears twice,
so every pair in it runs at the same time without sharing a node's NICs with another pair.
Full mode covers every pair once with the round-robin "circle method" (N-1 rounds for even N,
N for odd N, where each round gives one node a bye). Quick mode runs a few random pairings
(seeded) and re-tests suspects against nodes that passed; its cost does not grow with N.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Iterable, Sequence

from nccl_bench.doctor.repeat_noise import CONTROL_PAIRS

if TYPE_CHECKING:
    from nccl_bench.doctor.verdicts import Judgement, PairKey

Pair = tuple[int, int]
Round = list[Pair]

# Shuffles tried per quick round to find a pairing that repeats no pair already measured:
# enough that repeats are rare from N >= 6, cheap at N = 1,000 (a shuffle is O(N)).
QUICK_SHUFFLE_TRIES = 20


def _ordered(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def circle_rounds(n: int) -> list[Round]:
    """Every pair of n nodes exactly once, no node twice in a round (round-robin circle method).

    Node 0 stays put while the others rotate one seat per round; seat i plays seat m-1-i.
    With odd n a phantom node joins, and whoever meets it sits the round out.
    """
    if n < 2:
        return []
    seats = list(range(n)) + ([None] if n % 2 else [])
    m = len(seats)
    rounds: list[Round] = []
    for _ in range(m - 1):
        pairs = [(seats[i], seats[m - 1 - i]) for i in range(m // 2)]
        rounds.append(sorted(_ordered(a, b) for a, b in pairs if a is not None and b is not None))
        seats = [seats[0], seats[-1], *seats[1:-1]]
    return rounds


def random_rounds(n: int, rounds: int, seed: int) -> list[Round]:
    """`rounds` random perfect matchings of n nodes (one bye when n is odd), seeded.

    Each round keeps the shuffle (of QUICK_SHUFFLE_TRIES) that repeats the fewest pairs already
    drawn, so a few rounds meet as many different partners as they can.
    """
    if n < 2 or rounds < 1:
        return []
    rng = random.Random(seed)
    seen: set[Pair] = set()
    out: list[Round] = []
    for _ in range(rounds):
        best: Round | None = None
        best_repeats = n
        for _ in range(QUICK_SHUFFLE_TRIES):
            order = list(range(n))
            rng.shuffle(order)
            pairs = sorted(_ordered(order[i], order[i + 1]) for i in range(0, n - 1, 2))
            repeats = sum(pair in seen for pair in pairs)
            if repeats < best_repeats:
                best, best_repeats = pairs, repeats
            if repeats == 0:
                break
        assert best is not None
        seen.update(best)
        out.append(best)
    return out


def pack_rounds(pairs: Iterable[Pair]) -> list[Round]:
    """Place pairs into as few rounds as first-fit finds, no node twice in a round, order kept."""
    rounds: list[Round] = []
    busy: list[set[int]] = []
    for a, b in pairs:
        for index, nodes in enumerate(busy):
            if a not in nodes and b not in nodes:
                rounds[index].append(_ordered(a, b))
                nodes.update((a, b))
                break
        else:
            rounds.append([_ordered(a, b)])
            busy.append({a, b})
    return [sorted(r) for r in rounds]


def cross_checks(
    suspects: Sequence[int], passed: Sequence[int], measured: set[Pair], seed: int
) -> list[Pair]:
    """Quick mode: pair each suspect node with a node that passed and that it has not met yet.

    Partners are drawn (seeded) from the passed nodes, spread so that no passed node takes a
    second suspect before every passed node has one. A suspect that has met every passed node
    already, or a fleet with none, gets no cross-check.
    """
    rng = random.Random(seed)
    pool = sorted(passed)
    rng.shuffle(pool)
    load = {node: 0 for node in pool}
    out: list[Pair] = []
    for suspect in sorted(set(suspects)):
        fresh = [p for p in pool if p != suspect and _ordered(suspect, p) not in measured]
        if not fresh:
            continue
        partner = min(fresh, key=lambda p: load[p])  # min keeps the shuffled order among equals
        load[partner] += 1
        out.append(_ordered(suspect, partner))
    return out


def controls(judgement: "Judgement", hosts: Sequence[str], wanted: int, seed: int) -> list[Pair]:
    """`wanted` node pairs measured once and not low, drawn (seeded) to be measured again beside the
    re-tests: their two results tell how far one measurement wanders here and now (repeat_noise.py).
    """
    index = {host: i for i, host in enumerate(hosts)}
    low = {p.hosts for p in judgement.pairs if p.low}
    pool = sorted({p.hosts for p in judgement.pairs if len(p.attempts) == 1} - low,
                  key=lambda h: (index[h[0]], index[h[1]]))
    random.Random(seed).shuffle(pool)
    return [_ordered(index[a], index[b]) for a, b in pool[:wanted]]


def retests(judgement: "Judgement", hosts: Sequence[str], measured: Iterable["PairKey"], cross_check: bool,
            seed: int, with_controls: bool = False) -> list[Pair]:
    """The node pairs to measure next: every pair with an unconfirmed low result; with_controls (the
    first re-test) as many pairs that were not low (CONTROL_PAIRS, or as many as the re-tests), measured
    again beside them; and with cross_check (quick mode's first re-test) each node of a low pair that has
    not met a node that passed yet, paired with one (see cross_checks)."""
    index = {host: i for i, host in enumerate(hosts)}
    plan = [(index[a], index[b]) for a, b in judgement.retest_pairs]
    if plan and with_controls:
        plan += controls(judgement, hosts, max(len(plan), CONTROL_PAIRS), seed)
    if not cross_check:
        return plan
    in_low = {index[h] for p in judgement.pairs if p.low for h in p.hosts}
    passed = [i for i in range(len(hosts)) if i not in in_low]
    met = {_ordered(index[a], index[b]) for a, b, _ in measured}
    lonely = [node for node in sorted(in_low) if not any(node in pair and set(pair) - {node} <= set(passed)
                                                          for pair in met)]
    return plan + cross_checks(lonely, passed, met, seed)


def nothing_to_measure(phases: Sequence[str], ranks_per_host: Sequence[int]) -> str | None:
    """Why these phases measure nothing on hosts with these rank counts, or None when one of them
    measures something: a gate that measured nothing must not pass as healthy."""
    nodes = "nodes" in phases and any(count > 1 for count in ranks_per_host)
    pairs = "pairs" in phases and len(ranks_per_host) > 1
    if nodes or pairs:
        return None
    needs = []
    if "nodes" in phases:
        needs.append("the nodes phase needs a host with 2 or more ranks")
    if "pairs" in phases:
        needs.append("the pairs phase needs 2 or more hosts")
    layout = f"{sum(ranks_per_host)} rank(s) on {len(ranks_per_host)} host(s)"
    return f"{layout} leave the doctor nothing to measure: {' and '.join(needs)}"
