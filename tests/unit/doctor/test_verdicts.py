"""Attribution on synthetic matrices: exactly the injected node, link or rail is named, nobody else."""

from __future__ import annotations

from itertools import combinations

import pytest

from nccl_bench.doctor.verdicts import fleet_stat, gbps, judge

GOOD = 2.0
# A fixed +-5% wobble per measurement: what a healthy fabric gives, well inside the 20% tolerance.
WOBBLE = (1.00, 0.96, 1.04, 0.98, 1.02, 0.95, 1.05)


def _fleet(n: int, rails: int = 1, slow_nodes=(), slow_links=(), slow_rails=(), factor=0.1, attempts=2,
           first_only=()):
    """layout and pair attempts of n nodes; slow_* name what is injected (multiplies busbw by factor)."""
    hosts = [f"node{i}" for i in range(n)]
    layout = [(h, list(range(i * rails, (i + 1) * rails))) for i, h in enumerate(hosts)]
    pairs, k = {}, 0
    for a, b in combinations(hosts, 2):
        for rail in range(rails):
            value = GOOD * WOBBLE[k % len(WOBBLE)]
            k += 1
            slow = (a in slow_nodes or b in slow_nodes or (a, b) in slow_links
                    or (a, rail) in slow_rails or (b, rail) in slow_rails)
            if slow:
                value *= factor
            tries = [value] * attempts
            if (a, b) in first_only:  # slow the first time only: noise
                tries = [value * factor, value]
            pairs[(a, b, rail)] = tries
    return layout, pairs


def _named(judgement):
    return [(s.kind, s.hosts, s.rail) for s in judgement.suspects]


def test_healthy_noise_names_nobody():
    layout, pairs = _fleet(8)
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.verdict == "healthy" and result.suspects == []
    assert all(node.verdict == "ok" for node in result.nodes)
    assert result.retest_pairs == []
    assert result.pair_fleet.median_gbps == pytest.approx(GOOD * 1.05)  # capacity = each endpoint's best pair


def test_one_noisy_sample_is_not_confirmed():
    layout, pairs = _fleet(4, first_only=[("node0", "node1")])
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.suspects == []  # the re-test (second attempt) was fine: best attempt counts


def test_unconfirmed_low_asks_for_a_retest_and_names_nobody():
    layout, pairs = _fleet(4, slow_nodes=["node2"], attempts=1)
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.suspects == []
    assert result.retest_pairs == [("node0", "node2"), ("node1", "node2"), ("node2", "node3")]
    assert {p.hosts for p in result.pairs if p.low} == {("node0", "node2"), ("node1", "node2"), ("node2", "node3")}
    assert all(p.verdict == "ok" for p in result.pairs)


def test_one_bad_node():
    layout, pairs = _fleet(4, slow_nodes=["node2"])
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert _named(result) == [("node", ("node2",), None)]
    suspect = result.suspects[0]
    assert suspect.reason == "pair busbw 0.19 GB/s with 3 of 3 partners, fleet median 2.06 GB/s (-91%)"
    assert (suspect.measured_gbps, suspect.fleet_median_gbps) == pytest.approx((0.192, 2.06))
    assert suspect.line().startswith("node node2: pair busbw")
    assert [n.verdict for n in result.nodes] == ["ok", "ok", "suspect", "ok"]
    assert {p.hosts for p in result.pairs if p.verdict == "suspect"} == {
        ("node0", "node2"), ("node1", "node2"), ("node2", "node3")}


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_one_bad_link_names_the_link_not_its_nodes(n):
    layout, pairs = _fleet(n, slow_links=[("node0", "node1")])
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert _named(result) == [("link", ("node0", "node1"), None)]
    assert all(node.verdict == "ok" for node in result.nodes)
    assert "with their other partners node0" in result.suspects[0].reason


def test_one_bad_rail_on_multi_rank_nodes():
    layout, pairs = _fleet(4, rails=4, slow_rails=[("node1", 2)])
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert _named(result) == [("rail", ("node1",), 2)]
    assert result.suspects[0].reason == (
        "pair busbw 0.20 GB/s with 3 of 3 partners on rail 2; its other rails 1.96 GB/s, fleet median 2.08 GB/s (-90%)")
    assert result.suspects[0].line().startswith("rail 2 of node1: pair busbw 0.20 GB/s")
    assert [n.verdict for n in result.nodes] == ["ok", "suspect", "ok", "ok"]


def test_every_rail_slow_is_the_node():
    layout, pairs = _fleet(4, rails=2, slow_nodes=["node3"])
    assert _named(judge(layout, {}, pairs, tolerance=0.2)) == [("node", ("node3",), None)]


def test_noisy_fleet_widens_the_bar_at_most_twice_the_tolerance():
    """Capacities 1.0, 1.4, 1.8, 1.8: median 1.6, 3 sigma = 0.89 (56%), capped at 2 x 20%."""
    layout = [(f"n{i}", [i]) for i in range(4)]
    values = [1.0, 0.9, 0.8, 1.4, 1.2, 1.8]
    pairs = {(a, b, 0): [v, v] for (a, b), v in zip(combinations([h for h, _ in layout], 2), values, strict=True)}
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.pair_threshold_gbps == pytest.approx(1.6 * 0.6)
    assert _named(result) == [("node", ("n0",), None)]  # 0.9 and 0.8 with n2, n3: -44%, -50%


def test_noise_within_three_sigma_names_nobody():
    """Capacities 2.0, 2.0, 2.2, 2.2 (median 2.1, sigma 0.15): a pair at 1.67 is -20.5% but inside 3 sigma."""
    layout = [(f"n{i}", [i]) for i in range(4)]
    values = [1.67, 2.0, 1.9, 1.9, 2.0, 2.2]
    pairs = {(a, b, 0): [v, v] for (a, b), v in zip(combinations([h for h, _ in layout], 2), values, strict=True)}
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.pair_threshold_gbps == pytest.approx(2.1 - 3 * 1.4826 * 0.1)
    assert result.suspects == []


@pytest.mark.parametrize("n", [4, 6, 8])
def test_two_bad_nodes(n):
    layout, pairs = _fleet(n, slow_nodes=["node1", "node3"])
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert _named(result) == [("node", ("node1",), None), ("node", ("node3",), None)]
    assert [n.host for n in result.nodes if n.verdict == "suspect"] == ["node1", "node3"]


def test_bad_node_and_bad_link_together():
    layout, pairs = _fleet(6, slow_nodes=["node5"], slow_links=[("node0", "node2")])
    assert _named(judge(layout, {}, pairs, tolerance=0.2)) == [
        ("node", ("node5",), None), ("link", ("node0", "node2"), None)]


def test_slow_intra_node_all_reduce_names_the_node():
    layout, pairs = _fleet(4, rails=2)
    intra = {"node0": [100.0, 101.0], "node1": [99.0, 98.0], "node2": [12.0, 11.0], "node3": [100.0, 100.0]}
    result = judge(layout, intra, pairs, tolerance=0.2)
    assert _named(result) == [("node", ("node2",), None)]
    assert result.suspects[0].reason == (
        "intra-node all_reduce busbw 12.00 GB/s (attempts 12.00, 11.00), fleet median 99.50 GB/s (-88%)")
    assert result.nodes[2].intra_busbw_gbps == 12.0


def test_intra_low_once_is_retested_not_named():
    layout, pairs = _fleet(3, rails=2)
    intra = {"node0": [100.0], "node1": [20.0], "node2": [100.0]}
    result = judge(layout, intra, pairs, tolerance=0.2)
    assert result.suspects == [] and result.retest_intra == ["node1"]


def test_expect_floor_names_a_uniformly_slow_fleet():
    layout, pairs = _fleet(4)
    assert judge(layout, {}, pairs, tolerance=0.2).suspects == []
    result = judge(layout, {}, pairs, tolerance=0.2, expect_gbps=10.0)
    assert [s.kind for s in result.suspects] == ["node"] * 4
    assert "below --expect 10.00 GB/s" in result.suspects[0].reason


def test_two_nodes_slow_pair_is_a_link_and_needs_expect():
    layout, pairs = _fleet(2)
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.suspects == [] and any("--expect" in note for note in result.notes)
    result = judge(layout, {}, pairs, tolerance=0.2, expect_gbps=5.0)
    assert _named(result) == [("link", ("node0", "node1"), None)]
    assert "cannot be pinned on either node" in result.suspects[0].reason


def test_sparse_quick_matrix_bad_node_with_cross_checks():
    """Quick mode measures few pairs: a bad node met 2 partners and one passed node, all slow."""
    layout = [(f"n{i}", [i]) for i in range(8)]
    measured = {("n0", "n1"): 2.0, ("n2", "n3"): 2.1, ("n4", "n5"): 1.9, ("n6", "n7"): 2.0,
                ("n0", "n2"): 2.0, ("n1", "n3"): 0.2, ("n4", "n6"): 2.1, ("n5", "n7"): 2.0,
                ("n3", "n4"): 0.2, ("n1", "n5"): 2.0}
    pairs = {(a, b, 0): [v, v] for (a, b), v in measured.items()}
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert _named(result) == [("node", ("n3",), None)]


def test_fleet_stat_and_gbps_format():
    stat = fleet_stat([1.0, 2.0, 3.0, 10.0])
    assert (stat.median_gbps, stat.mad_gbps, stat.count) == (2.5, 1.0, 4)
    assert fleet_stat([]) is None
    assert gbps(2.1) == "2.10" and gbps(0.0251) == "0.0251" and gbps(0.21) == "0.21"


def test_noisy_fleet_gets_a_warning():
    layout = [(f"n{i}", [i]) for i in range(4)]
    values = [1.0, 0.9, 0.8, 1.4, 1.2, 1.8]  # capacities 1.0, 1.4, 1.8, 1.8: sigma 19% of the median
    pairs = {(a, b, 0): [v, v] for (a, b), v in zip(combinations([h for h, _ in layout], 2), values, strict=True)}
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert any("varies by" in note for note in result.notes)


def test_small_noisy_fleet_still_names_a_broken_node():
    """A run on simulated hosts: three healthy pairs at 0.68, 0.76 and 1.20 GB/s made the MAD of four
    capacities as wide as the median; the widening cap keeps the bar at 60% of it (0.59 GB/s)."""
    layout = [(h, [i]) for i, h in enumerate(["nodea", "nodeb", "nodec", "noded"])]
    measured = {("nodea", "nodeb"): 0.682, ("nodea", "noded"): 0.759, ("nodeb", "noded"): 1.202,
                ("nodea", "nodec"): 0.0238, ("nodeb", "nodec"): 0.0238, ("nodec", "noded"): 0.0239}
    pairs = {(a, b, 0): [v, v] for (a, b), v in measured.items()}
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.pair_threshold_gbps == pytest.approx((0.759 + 1.202) / 2 * 0.6)
    assert _named(result) == [("node", ("nodec",), None)]


def _contended(n: int = 8, slow_link=None, slow_node=None):
    """Every host's pairs at a contended 0.7 GB/s (+-5%) but one lucky pair each at 2 GB/s (a round that ran
    alone), as pairs sharing a loaded machine or spine measure; optionally one slow link or node at 5%."""
    layout, pairs = _fleet(n)
    for k, (a, b, rail) in enumerate(pairs):
        lucky = int(a[4:]) // 2 == int(b[4:]) // 2 and int(a[4:]) % 2 == 0
        value = 2.0 if lucky else 0.7 * WOBBLE[k % len(WOBBLE)]
        if (a, b) == slow_link or slow_node in (a, b):
            value *= 0.05
        pairs[(a, b, rail)] = [value, value]
    return layout, pairs


def test_a_contended_fleet_is_a_fabric_verdict_never_most_hosts_named():
    layout, pairs = _contended()
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.contended and result.verdict == "contended" and result.suspects == []
    assert result.pair_fleet.median_gbps == pytest.approx(0.7, rel=0.06)  # the typical pair, not the lucky ones
    # six hosts are low with all but their lucky partner; the last two have too few healthy partners left
    assert result.notes[0].startswith("the fabric is contended or noisy: 6 of 8 hosts measured low against the "
                                      "fleet's best pairs (median of each host's best, 2.00 GB/s), so they were "
                                      "judged against the typical pair (0.71 GB/s)")


def test_in_a_contended_fleet_what_stands_out_from_it_is_still_named():
    layout, pairs = _contended(slow_link=("node1", "node6"))
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.contended and _named(result) == [("link", ("node1", "node6"), None)]
    layout, pairs = _contended(slow_node="node3")
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.contended and _named(result) == [("node", ("node3",), None)]
    assert "only the hosts and pairs that stand out from it are named" in result.notes[0]


def test_an_expect_floor_is_absolute_and_no_contention_rule_applies():
    layout, pairs = _contended()
    result = judge(layout, {}, pairs, tolerance=0.2, expect_gbps=1.5)
    assert not result.contended and len(result.suspects) == 6


def _one_rail_slow_everywhere(intra_low=()):
    """8 hosts of 4 rails whose rail 0 is slow with every partner (a rail's fabric shared and busy), node2
    slow on every rail besides; intra-node results of 100 GB/s, 10 GB/s twice for the hosts of intra_low.

    The arithmetic that makes it stay low against its own typical pair. Every host is low on rail 0 with
    all 7 partners, so the best-pair reference names all 8 (a rail suspect each, node2 a node). The typical
    pair is the median of 112 first attempts of which 28 (rail 0) + 21 (node2's other rails) = 49 are at
    a tenth: fewer than half, so the median is a healthy ~1.9 GB/s, its MAD a healthy pair's wobble, the
    bar 20% below it, and rail 0 is still low everywhere: 8 of 8 named again. (With one rail and every
    pair measured this cannot happen on a small fleet: k hosts low with all their partners put all but
    C(n-k, 2) of the n(n-1)/2 pairs below the bar, more than half once k > n/2, and a bar below the
    median leaves at most half the pairs below it; a rail is a quarter of the pairs here.)"""
    layout, pairs = _fleet(8, rails=4, slow_nodes=["node2"], slow_rails=[(f"node{i}", 0) for i in range(8)])
    intra = {host: [10.0, 10.0] if host in intra_low else [100.0, 100.0] for host, _ in layout}
    return layout, intra, pairs


def test_a_fleet_low_against_its_typical_pair_names_no_host_from_pairs():
    layout, intra, pairs = _one_rail_slow_everywhere()
    result = judge(layout, intra, pairs, tolerance=0.2)
    assert sum(pair.low for pair in result.pairs) == 49 and len(result.pairs) == 112
    assert result.pair_fleet.median_gbps > 1.8 and result.pair_threshold_gbps > 0.2 * 2  # rail 0 stays low
    assert result.contended and result.verdict == "contended" and result.suspects == []
    assert all(node.verdict == "ok" for node in result.nodes)
    assert result.notes[0].startswith("the fabric is contended or noisy: 8 of 8 hosts measured low")
    assert "no host stands out from that state, so none is named" in result.notes[0]


def test_in_a_fleet_low_against_its_typical_pair_a_host_low_on_its_own_is_kept():
    """node5 is named by its own intra-node result alone, node2 by its pairs and its intra-node result:
    both kept (no other host's load moves an intra-node all_reduce); every rail suspect is dropped."""
    layout, intra, pairs = _one_rail_slow_everywhere(intra_low=("node2", "node5"))
    result = judge(layout, intra, pairs, tolerance=0.2)
    assert result.contended and _named(result) == [("node", ("node2",), None), ("node", ("node5",), None)]
    node2, node5 = result.suspects
    assert node2.reason.startswith("pair busbw 0.20 GB/s with 7 of 7 partners") and "intra-node" in node2.reason
    assert node5.reason.startswith("intra-node all_reduce busbw 10.00 GB/s")
    assert [node.host for node in result.nodes if node.verdict == "suspect"] == ["node2", "node5"]


def _repeat_fleet(control_moves, low_host="node0", shortfall=0.6, hosts=6):
    """A fleet whose low_host measured `shortfall` of the others twice (first pass and re-test), and whose
    other pairs were measured again as controls, each control's second result its first times one of
    control_moves: how far this fabric's results wander between two measurements."""
    layout, pairs = _fleet(hosts, attempts=1)
    moves = iter(control_moves * len(pairs))
    for key, (value,) in list(pairs.items()):
        pairs[key] = [value * shortfall] * 2 if low_host in key[:2] else [value, value * next(moves)]
    return layout, pairs


def test_a_shortfall_within_the_fabrics_repeat_noise_names_nobody_and_says_so():
    """Controls that moved -30%..+40% between two measurements (one measurement's sigma 18%, from 10): a host
    at -40% twice is within t(3, 9 dof) sigmas of that noise, so nobody is named; the note gives the noise
    and the pairs spared."""
    layout, pairs = _repeat_fleet((0.7, 1.4, 0.8, 1.25, 1.0))
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.repeat.controls == 10 and result.repeat.sigma == pytest.approx(0.184, abs=0.001)
    assert result.suspects == [] and result.retest_pairs == []
    (note,) = [n for n in result.notes if n.startswith("re-measured")]
    assert "10 control pairs" in note and "cannot be resolved now" in note and "node0-node1" in note


def test_a_quiet_fabrics_controls_leave_the_tolerance_to_decide():
    """The same host at -40%, controls within 2% of their first result: the host is named."""
    layout, pairs = _repeat_fleet((0.99, 1.02, 0.98, 1.01, 1.0))
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.repeat.sigma < 0.02
    assert _named(result) == [("node", ("node0",), None)]
    assert not any(n.startswith("re-measured") for n in result.notes)


@pytest.mark.parametrize("moves", [(0.7, 1.4, 0.8, 1.25, 1.0), (0.99, 1.02, 0.98, 1.01, 1.0)])
def test_a_broken_host_is_named_however_noisy_the_controls(moves):
    layout, pairs = _repeat_fleet(moves, shortfall=0.05)
    assert _named(judge(layout, {}, pairs, tolerance=0.2)) == [("node", ("node0",), None)]


def test_an_expect_floor_is_not_excused_by_repeat_noise():
    layout, pairs = _repeat_fleet((0.7, 1.4, 0.8, 1.25, 1.0))
    assert _named(judge(layout, {}, pairs, tolerance=0.2, expect_gbps=1.5)) == [("node", ("node0",), None)]


def test_fewer_controls_than_needed_leave_the_old_rule():
    layout, pairs = _fleet(4, attempts=1)
    pairs[("node0", "node1", 0)] = [0.6 * GOOD] * 2
    pairs[("node0", "node2", 0)] = [0.6 * GOOD] * 2
    pairs[("node2", "node3", 0)] = [GOOD, 0.5 * GOOD]  # one control: no sigma from one difference
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.repeat is None


def test_one_control_that_moved_far_widens_the_noise_and_a_faster_fabric_never_raises_the_bar():
    """Seen beside two busy loops: three controls moved x0.48, x1.19 and x1.23 (a MAD of them would say
    3%); node2's pairs came -22% twice. The one that moved far counts, and the controls' rise (+18%)
    does not lift the bar: nobody is named."""
    layout, pairs = _fleet(4, attempts=1)
    pairs[("node0", "node1", 0)] = [pairs[("node0", "node1", 0)][0], pairs[("node0", "node1", 0)][0] * 0.48]
    pairs[("node1", "node3", 0)] = [pairs[("node1", "node3", 0)][0], pairs[("node1", "node3", 0)][0] * 1.19]
    pairs[("node0", "node3", 0)] = [pairs[("node0", "node3", 0)][0], pairs[("node0", "node3", 0)][0] * 1.23]
    for key in (("node0", "node2", 0), ("node1", "node2", 0), ("node2", "node3", 0)):
        pairs[key] = [0.78 * GOOD] * 2
    result = judge(layout, {}, pairs, tolerance=0.2)
    assert result.repeat.controls == 3 and result.repeat.shift > 0.15 and result.repeat.sigma > 0.3
    assert {p.hosts for p in result.pairs if p.low} == {("node0", "node2"), ("node1", "node2"), ("node2", "node3")}
    assert result.suspects == []
