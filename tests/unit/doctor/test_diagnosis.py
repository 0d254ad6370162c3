"""Whole diagnoses on a synthetic fabric: the schedule, the re-test plan and the verdicts together,
as the ranks run them (first rounds, then re-tests until nothing low is unconfirmed)."""

from __future__ import annotations

import zlib

from nccl_bench.doctor.schedule import circle_rounds, random_rounds, retests
from nccl_bench.doctor.verdicts import judge

GOOD = 2.0


def _wobble(*key) -> float:
    """A fixed +-5% per measurement, different for every pair and attempt."""
    return 0.95 + (zlib.crc32(repr(key).encode()) % 1000) / 10000


def _diagnose(n, fabric, quick=False, seed=0):
    hosts = [f"n{i:02d}" for i in range(n)]
    layout = [(h, [i]) for i, h in enumerate(hosts)]
    pairs: dict = {}

    def measure(a, b):
        attempt = len(pairs.get((hosts[a], hosts[b], 0), [])) + 1
        pairs.setdefault((hosts[a], hosts[b], 0), []).append(fabric(a, b, attempt) * _wobble(a, b, attempt))

    first = random_rounds(n, 3, seed) if quick else circle_rounds(n)
    for round_pairs in first:
        for a, b in round_pairs:
            measure(a, b)
    judgement = judge(layout, {}, pairs, tolerance=0.2)
    for attempt in range(2, 5):
        plan = retests(judgement, hosts, set(pairs), quick and attempt == 2, seed)
        if not plan:
            break
        for a, b in plan:
            measure(a, b)
        judgement = judge(layout, {}, pairs, tolerance=0.2)
    return judgement, sum(len(v) for v in pairs.values())


def _named(judgement):
    return [(s.kind, s.hosts) for s in judgement.suspects]


def test_full_mode_bad_node_and_link_on_nine_nodes():
    def fabric(a, b, attempt):
        return GOOD * (0.1 if 4 in (a, b) or (a, b) == (1, 7) else 1)

    judgement, measured = _diagnose(9, fabric)
    assert _named(judgement) == [("node", ("n04",)), ("link", ("n01", "n07"))]
    assert measured == 36 + 8 + 1  # every pair once, then each low pair re-tested once


def test_quick_mode_finds_a_bad_node_at_a_cost_independent_of_n():
    def fabric(a, b, attempt):
        return GOOD * (0.1 if 17 in (a, b) else 1)

    judgement, measured = _diagnose(64, fabric, quick=True)
    assert _named(judgement) == [("node", ("n17",))]
    # 3 pairings of 32 pairs, n17's 3 pairs re-tested, 1 cross-check against a passed node, re-tested
    assert measured == 96 + 3 + 2


def test_quick_mode_link_found_only_when_drawn():
    drawn = random_rounds(64, 3, seed=0)[0][0]

    def fabric_drawn(a, b, attempt):
        return GOOD * (0.1 if (a, b) == drawn else 1)

    judgement, _ = _diagnose(64, fabric_drawn, quick=True)
    assert _named(judgement) == [("link", tuple(f"n{i:02d}" for i in drawn))]
    met = {p for r in random_rounds(64, 3, seed=0) for p in r}
    missed = next((a, b) for a in range(64) for b in range(a + 1, 64) if (a, b) not in met)

    def fabric_missed(a, b, attempt):
        return GOOD * (0.1 if (a, b) == missed else 1)

    judgement, _ = _diagnose(64, fabric_missed, quick=True)
    assert judgement.suspects == []  # what quick mode can miss: a fault in one pair it never drew


def test_one_slow_first_measurement_names_nobody():
    def fabric(a, b, attempt):
        return GOOD * (0.3 if attempt == 1 and (a + b) % 7 == 0 else 1)

    for quick in (False, True):
        judgement, _ = _diagnose(16, fabric, quick=quick)
        assert judgement.suspects == [], quick
