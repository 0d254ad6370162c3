"""The pair schedule: every pair once, no node twice in a round, the round counts of the circle method."""

from __future__ import annotations

from itertools import combinations

import pytest

from nccl_bench.doctor.schedule import circle_rounds, cross_checks, nothing_to_measure, pack_rounds, random_rounds


def _no_node_twice(rounds) -> bool:
    return all(len({n for pair in r for n in pair}) == 2 * len(r) for r in rounds)


@pytest.mark.parametrize("n", range(2, 10))
def test_circle_covers_every_pair_exactly_once(n):
    rounds = circle_rounds(n)
    pairs = [pair for r in rounds for pair in r]
    assert sorted(pairs) == list(combinations(range(n), 2))
    assert len(pairs) == len(set(pairs)) == n * (n - 1) // 2


@pytest.mark.parametrize("n", range(2, 10))
def test_circle_no_node_twice_in_a_round_and_round_count(n):
    rounds = circle_rounds(n)
    assert _no_node_twice(rounds)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    # even n: everyone plays every round; odd n: exactly one node sits each round out, each node once
    assert all(len(r) == n // 2 for r in rounds)
    if n % 2:
        byes = [next(iter(set(range(n)) - {x for pair in r for x in pair})) for r in rounds]
        assert sorted(byes) == list(range(n))


def test_circle_small_cases_exact():
    assert circle_rounds(0) == [] and circle_rounds(1) == []
    assert circle_rounds(2) == [[(0, 1)]]
    assert circle_rounds(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    assert circle_rounds(3) == [[(1, 2)], [(0, 2)], [(0, 1)]]


@pytest.mark.parametrize("n", [2, 3, 5, 8, 9, 64])
def test_random_rounds_are_matchings_deterministic_per_seed(n):
    rounds = random_rounds(n, 3, seed=7)
    assert len(rounds) == 3 and _no_node_twice(rounds)
    assert all(len(r) == n // 2 for r in rounds)
    assert rounds == random_rounds(n, 3, seed=7)
    if n >= 8:
        assert rounds != random_rounds(n, 3, seed=8)
        pairs = [p for r in rounds for p in r]
        assert len(pairs) == len(set(pairs)), "no pair repeated when fresh partners exist"


def test_random_rounds_cost_independent_of_n():
    assert len(random_rounds(1000, 3, seed=0)) == 3
    assert random_rounds(1, 3, seed=0) == [] and random_rounds(5, 0, seed=0) == []


def test_pack_rounds_first_fit_keeps_nodes_apart():
    assert pack_rounds([(0, 1), (1, 2), (2, 3), (3, 0), (4, 5)]) == [[(0, 1), (2, 3), (4, 5)], [(0, 3), (1, 2)]]
    assert pack_rounds([]) == []


def test_cross_checks_pick_fresh_passed_partners_spread_out():
    measured = {(0, 1), (2, 3), (0, 2)}
    checks = cross_checks([0, 1], passed=[2, 3, 4], measured=measured, seed=0)
    assert checks == cross_checks([0, 1], passed=[2, 3, 4], measured=measured, seed=0)
    assert len(checks) == 2
    partners = [b if a in (0, 1) else a for a, b in checks]
    assert len(set(partners)) == 2  # no passed node takes a second suspect while another is idle
    assert (0, 2) not in checks  # 0 has met 2 already
    assert all(p in (2, 3, 4) for p in partners)
    assert cross_checks([0], passed=[1], measured={(0, 1)}, seed=0) == []
    assert cross_checks([0], passed=[], measured=set(), seed=0) == []


@pytest.mark.parametrize("phases, ranks_per_host, measures", [
    (("nodes", "pairs"), [1], False),
    (("nodes", "pairs"), [2], True),
    (("nodes", "pairs"), [1, 1], True),
    (("nodes",), [1, 1, 1], False),
    (("nodes",), [1, 2], True),
    (("pairs",), [8], False),
    (("pairs",), [1, 1], True),
])
def test_nothing_to_measure_names_a_layout_no_chosen_phase_can_use(phases, ranks_per_host, measures):
    reason = nothing_to_measure(phases, ranks_per_host)
    assert (reason is None) == measures
    if reason is not None:
        assert reason.startswith(f"{sum(ranks_per_host)} rank(s) on {len(ranks_per_host)} host(s) leave the doctor")
        assert ("nodes phase needs" in reason) == ("nodes" in phases)
        assert ("pairs phase needs" in reason) == ("pairs" in phases)


def test_the_first_retest_measures_controls_that_were_not_low_beside_the_low_pairs():
    """A low pair gets at least MIN_CONTROLS controls, pairs measured once and not low, the same per seed."""
    from nccl_bench.doctor.repeat_noise import CONTROL_PAIRS, MIN_CONTROLS
    from nccl_bench.doctor.schedule import retests
    from nccl_bench.doctor.verdicts import judge

    hosts = [f"node{i}" for i in range(6)]
    layout = [(h, [i]) for i, h in enumerate(hosts)]
    pairs = {(a, b, 0): [0.5 if (a, b) == ("node0", "node1") else 2.0] for a, b in combinations(hosts, 2)}
    judgement = judge(layout, {}, pairs, tolerance=0.2)
    assert judgement.retest_pairs == [("node0", "node1")]
    plan = retests(judgement, hosts, set(pairs), cross_check=False, seed=3, with_controls=True)
    assert plan[0] == (0, 1) and len(plan) == 1 + max(MIN_CONTROLS, CONTROL_PAIRS) and len(set(plan)) == len(plan)
    assert plan == retests(judgement, hosts, set(pairs), cross_check=False, seed=3, with_controls=True)
    assert retests(judgement, hosts, set(pairs), cross_check=False, seed=3) == [(0, 1)]
    healthy = judge(layout, {}, {k: [2.0] for k in pairs}, tolerance=0.2)
    assert retests(healthy, hosts, set(pairs), cross_check=False, seed=3, with_controls=True) == []
