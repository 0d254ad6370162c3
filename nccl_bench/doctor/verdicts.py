"""Verdicts of the doctor: which node, rail or link is slow, judged against the fleet. Pure.

Every measurement may have been taken more than once; its value is the best attempt, because
noise on a shared fabric only ever slows a transfer down. The fleet median comes from first
attempts only, so re-tests (best of two) cannot raise the bar for results measured once. A
measurement is *low* when its value is below the fleet median by more than the tolerance and by
more than MAD_Z sigmas (sigma = 1.4826 x MAD; this widens the tolerance at most MAX_WIDENING-fold),
or below --expect when given, and *confirmed* once a re-test agrees: only confirmed ones name anyone.
Re-tests are run beside control pairs that were not low (schedule.retests): how far a control's second
measurement lands from its first is the noise of one measurement here and now, free of any real
difference between hosts. A low result is confirmed only when it is also below the median (moved as
the controls moved) by more than Student's t at 3 of those sigmas for their count: a shortfall that
the fabric's own repeat noise could have made names nobody.

Pairs are judged per endpoint, (host, rail): an endpoint's "capacity" is its best pair, so a
slow partner cannot drag a healthy node down, and the fleet median of capacities is the
reference. An endpoint is slow when it is low with all of its partners (at least
MIN_PARTNERS_FOR_NODE), or, peeling the worst first, with more than half of the partners not
already found slow. A node whose every rail is slow (or that is slow in its own intra-node
all_reduce) is a `node` suspect; some rails only: `rail` suspects; a low pair whose two
endpoints are both fine is a `link`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from nccl_bench.doctor.doctor_config import option_name, option_usage
from nccl_bench.doctor.repeat_noise import RepeatNoise, repeat_bar, repeat_noise
from nccl_bench.units import hostlist, stats

# One slow partner proves nothing about a node: it takes two to tell a node from a link.
MIN_PARTNERS_FOR_NODE = 2
# A node slow with more than this share of its healthy partners is the node at fault.
MAJORITY = 0.5
# A result is low only if it is also this many sigmas (from the MAD) below the median: on a quiet
# fabric sigma is tiny and the tolerance decides; on a noisy one (the simulated hosts of a loaded
# 2-core machine swing 40%) the bar drops with the noise instead of naming healthy nodes.
MAD_Z = 3.0
# ...but never past this many times the tolerance: the MAD of a small fleet is itself noisy (four
# capacities of 0.76, 1.2, 1.2 and a broken 0.024 GB/s gave 3 sigma = the whole median).
MAX_WIDENING = 2.0
# The fleet's spread (sigma from MAD) above this share of the tolerance gets a note in the report.
SPREAD_WARNING_SHARE = 0.5
# A fleet in which more than half the hosts measure low against the best pairs is contended (a shared
# spine, a loaded host running many pairs at once): the lucky rounds set that reference, and most hosts
# are "slow with all their partners". Judged again against the typical pair instead, only the hosts
# that stand out from that state are named, and never a majority of the fleet (an exclude list of most
# of a cluster is a verdict on the fabric, not on its hosts). Small fleets cannot tell: from four hosts on.
CONTENDED_MIN_HOSTS = 4

OK = "ok"
SUSPECT = "suspect"

PairKey = tuple[str, str, int]  # (host a, host b, rail), a before b in node order


@dataclass(frozen=True)
class FleetStat:
    """Median and MAD of one kind of measurement across the fleet."""

    median_gbps: float
    mad_gbps: float
    count: int


@dataclass(frozen=True)
class NodeVerdict:
    host: str
    ranks: tuple[int, ...]
    intra_busbw_gbps: float | None
    pair_median_gbps: float | None
    verdict: str


@dataclass(frozen=True)
class PairVerdict:
    hosts: tuple[str, str]
    rail: int
    busbw_gbps: float  # best attempt
    attempts: tuple[float, ...]
    low: bool  # below the threshold, confirmed or not
    verdict: str  # suspect = low and confirmed by a re-test


@dataclass(frozen=True)
class Suspect:
    kind: str  # node | link | rail | missing (doctor/roster.py) | config (doctor/config_check.py)
    hosts: tuple[str, ...]
    rail: int | None
    measured_gbps: float | None  # None for a host that never joined (doctor/roster.py) and for config
    fleet_median_gbps: float | None
    reason: str
    degraded: bool = False  # a config suspect for broken hardware, not a mere difference: its host is excluded

    def line(self) -> str:
        """One line in words: `node nodec: pair busbw 0.21 GB/s with 3 of 3 partners, fleet median ...`."""
        if self.kind == "rail":
            return f"rail {self.rail} of {self.hosts[0]}: {self.reason}"
        if self.kind == "config":
            return f"config {hostlist.compress(self.hosts)}: {self.reason}"
        on_rail = f" (rail {self.rail})" if self.rail is not None else ""
        return f"{self.kind} {'-'.join(self.hosts)}{on_rail}: {self.reason}"


@dataclass
class Judgement:
    nodes: list[NodeVerdict]
    pairs: list[PairVerdict]
    suspects: list[Suspect]
    pair_fleet: FleetStat | None
    intra_fleet: FleetStat | None
    pair_threshold_gbps: float | None
    intra_threshold_gbps: float | None
    retest_pairs: list[tuple[str, str]] = field(default_factory=list)  # node pairs with an unconfirmed low
    retest_intra: list[str] = field(default_factory=list)  # hosts with an unconfirmed low intra-node result
    notes: list[str] = field(default_factory=list)
    contended: bool = False  # most hosts measured low against the best pairs: judged against the typical pair
    repeat: RepeatNoise | None = None  # the re-measured controls' shift and noise (None: too few)

    @property
    def verdict(self) -> str:
        return "suspects" if self.suspects else "contended" if self.contended else "healthy"


def fleet_stat(values: Sequence[float]) -> FleetStat | None:
    if not values:
        return None
    return FleetStat(stats.median(values), stats.mad(values), len(values))


def gbps(value: float) -> str:
    """2 decimals, as nccl-tests prints busbw; 3 significant digits below 0.1 so 0.025 stays 0.025."""
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.3g}"


def _versus(value: float, fleet: float, expect_gbps: float | None) -> str:
    text = f"fleet median {gbps(fleet)} GB/s ({(value / fleet - 1) * 100:+.0f}%)" if fleet > 0 else "no fleet median"
    if expect_gbps is not None and value < expect_gbps:
        text += f", below {option_name('expect_gbps')} {gbps(expect_gbps)} GB/s"
    return text


def _attempts_text(attempts: Sequence[float]) -> str:
    return "" if len(attempts) < 2 else " (attempts " + ", ".join(gbps(a) for a in attempts) + ")"


def relative_threshold(fleet: FleetStat, tolerance: float) -> float:
    """Below the median by more than the tolerance and by more than MAD_Z sigmas, the latter
    widening the tolerance at most MAX_WIDENING-fold (and never to the whole median)."""
    if fleet.median_gbps <= 0:
        return 0.0
    sigma_share = MAD_Z * stats.MAD_TO_SIGMA * fleet.mad_gbps / fleet.median_gbps
    share = min(max(tolerance, sigma_share), MAX_WIDENING * tolerance, 0.9)
    return fleet.median_gbps * (1 - max(share, tolerance))


def _threshold(fleet: FleetStat | None, tolerance: float, expect_gbps: float | None) -> float | None:
    relative = None if fleet is None else relative_threshold(fleet, tolerance)
    if expect_gbps is None:
        return relative
    return expect_gbps if relative is None else max(relative, expect_gbps)


@dataclass(frozen=True)
class _IntraJudgement:
    """Intra-node all_reduce results, judged against the other nodes' intra-node results."""

    best: dict[str, float]  # host -> best attempt
    fleet: FleetStat | None  # from first attempts
    threshold: float | None
    low: set[str]  # hosts below the threshold, confirmed or not
    confirmed: set[str]  # low hosts with a re-test


def _judge_intra(intra: Mapping[str, Sequence[float]], tolerance: float) -> _IntraJudgement:
    best = {host: max(values) for host, values in intra.items() if values}
    fleet = fleet_stat([values[0] for values in intra.values() if values])
    threshold = None if fleet is None or fleet.count < 2 else relative_threshold(fleet, tolerance)
    low = {h for h, v in best.items() if threshold is not None and v < threshold}
    confirmed = {h for h in low if len(intra[h]) >= 2}
    return _IntraJudgement(best, fleet, threshold, low, confirmed)


def _endpoint_partners(pairs: Mapping[PairKey, Sequence[float]]) -> dict[tuple[str, int], dict[str, float]]:
    """Endpoint (host, rail) -> partner host -> first attempt of their pair."""
    partners: dict[tuple[str, int], dict[str, float]] = {}
    for (a, b, rail), values in pairs.items():
        if values:
            partners.setdefault((a, rail), {})[b] = values[0]
            partners.setdefault((b, rail), {})[a] = values[0]
    return partners


def _rail_suspects(host, slow_rails, partners, best, is_low, pair_fleet, expect_gbps) -> list[Suspect]:
    """One `rail` suspect for each of `slow_rails`, the host's other rails being fine."""
    suspects = []
    for rail in slow_rails:
        found = partners[(host, rail)]
        value = stats.median([v for (a, b, r), v in best.items() if r == rail and host in (a, b)])
        others = [v for (a, b, r), v in best.items() if host in (a, b) and r != rail]
        other_text = f"; its other rails {gbps(stats.median(others))} GB/s" if others else ""
        slow_with = sum(is_low((host, rail), p) for p in found)
        suspects.append(Suspect(
            "rail", (host,), rail, value, pair_fleet.median_gbps,
            f"pair busbw {gbps(value)} GB/s with {slow_with} of {len(found)} partners on rail {rail}"
            f"{other_text}, " + _versus(value, pair_fleet.median_gbps, expect_gbps),
        ))
    return suspects


def _spread_notes(pair_fleet: FleetStat | None, intra_fleet: FleetStat | None, tolerance: float) -> list[str]:
    """A note for each fleet whose spread is enough to widen the bar beyond the tolerance."""
    notes = []
    for fleet, what in ((pair_fleet, "pair"), (intra_fleet, "intra-node")):
        if fleet is not None and fleet.median_gbps > 0 and fleet.count >= 3:
            spread = stats.MAD_TO_SIGMA * fleet.mad_gbps / fleet.median_gbps
            if spread > SPREAD_WARNING_SHARE * tolerance:
                notes.append(
                    f"the fleet's {what} busbw varies by {spread:.0%} (MAD-based sigma), more than half of "
                    f"{option_name('tolerance')} {tolerance:.0%}: results are judged {MAD_Z:g} sigmas "
                    "below the median at least; a quieter fabric gives sharper verdicts"
                )
    return notes


def judge(
    layout: Sequence[tuple[str, Sequence[int]]],
    intra: Mapping[str, Sequence[float]],
    pairs: Mapping[PairKey, Sequence[float]],
    tolerance: float,
    expect_gbps: float | None = None,
) -> Judgement:
    """Verdicts from every measurement so far.

    layout: (host, its ranks) in node order; intra: host -> intra-node all_reduce busbw of each
    attempt (hosts with one rank absent); pairs: (host a, host b, rail) -> pair busbw of each attempt.
    A contended fleet (CONTENDED_MIN_HOSTS) is judged again against the typical pair; an --expect floor
    is absolute and names a uniformly slow fleet whole.
    """
    first = _judge(layout, intra, pairs, tolerance, expect_gbps, typical=False)
    hosts = [host for host, _ in layout]
    if expect_gbps is not None or len(hosts) < CONTENDED_MIN_HOSTS or not _most_named(first, hosts):
        return first
    again = _judge(layout, intra, pairs, tolerance, None, typical=True)
    low = len(_named_hosts(first.suspects))
    note = (f"the fabric is contended or noisy: {low} of {len(hosts)} hosts measured low against the fleet's best "
            f"pairs (median of each host's best, {gbps(first.pair_fleet.median_gbps)} GB/s), so they were judged "
            f"against the typical pair ({gbps(again.pair_fleet.median_gbps)} GB/s)")
    if _most_named(again, hosts):
        again = _without_pair_nodes(again, _judge_intra(intra, tolerance).confirmed)
        note += ("; no host stands out from that state, so none is named: try a quieter window, "
                 f"{option_usage('expect_gbps')} for an absolute floor, or fewer pairs at once")
    else:
        note += "; only the hosts and pairs that stand out from it are named"
    again.notes.insert(0, note)
    again.contended = True
    return again


def _named_hosts(suspects: Sequence[Suspect]) -> set[str]:
    """The hosts these suspects would put on the exclude list (node and rail suspects)."""
    return {h for s in suspects if s.kind in ("node", "rail") for h in s.hosts}


def _most_named(judgement: Judgement, hosts: Sequence[str]) -> bool:
    return len(_named_hosts(judgement.suspects)) > MAJORITY * len(hosts)


def _without_pair_nodes(judgement: Judgement, intra_confirmed: set[str]) -> Judgement:
    """The judgement with no host named from pairs alone: in a contended fleet that would be most of it. A
    host whose own intra-node result is confirmed low keeps its verdict (no other host's load moves it)."""
    kept = [s for s in judgement.suspects if s.kind == "link" or (
        s.kind == "node" and intra_confirmed.intersection(s.hosts))]
    named = _named_hosts(kept)
    judgement.suspects = kept
    judgement.nodes = [replace(n, verdict=SUSPECT if n.host in named else OK) for n in judgement.nodes]
    return judgement


def _judge(layout, intra, pairs, tolerance: float, expect_gbps: float | None, typical: bool) -> Judgement:
    """judge's verdicts against one pair reference: the median of each endpoint's best pair (a healthy
    host reaches its capacity with some partner), or, `typical`, the median of every pair."""
    hosts = [host for host, _ in layout]
    order = {host: index for index, host in enumerate(hosts)}
    notes: list[str] = []

    # Intra-node all_reduce, judged against the other nodes' intra-node results.
    intra_judged = _judge_intra(intra, tolerance)
    best_intra, intra_fleet, intra_confirmed = intra_judged.best, intra_judged.fleet, intra_judged.confirmed
    if intra_fleet is not None and intra_fleet.count == 1:
        notes.append("one node has an intra-node result: nothing to compare it with")

    # Pairs: endpoints (host, rail) and their capacity (best pair).
    best = {key: max(values) for key, values in pairs.items() if values}
    partners = _endpoint_partners(pairs)
    pair_fleet = fleet_stat([values[0] for values in pairs.values() if values] if typical
                            else [max(found.values()) for found in partners.values()])
    threshold = _threshold(pair_fleet, tolerance, expect_gbps)
    low = {key for key, value in best.items() if threshold is not None and value < threshold}
    noise = repeat_noise(pairs, threshold)
    bar = None if pair_fleet is None else repeat_bar(pair_fleet.median_gbps, noise, tolerance)
    confirmed = {key for key in low if len(pairs[key]) >= 2 and (
        bar is None or best[key] < bar or (expect_gbps is not None and best[key] < expect_gbps))}
    spared = sorted(key for key in low - confirmed if len(pairs[key]) >= 2)
    if noise is not None and spared:
        notes.append(
            f"re-measured beside {noise.controls} control pairs, which moved {math.expm1(noise.shift):+.0%} as a "
            f"whole and by {math.expm1(noise.sigma):.0%} each (one measurement's sigma): re-tests above "
            f"{gbps(bar)} GB/s are within this fabric's own noise and name nobody "
            f"({option_name('tolerance')} {tolerance:.0%} cannot be resolved now); spared: "
            + ", ".join(f"{a}-{b}" for a, b, _ in spared))

    def is_low(end: tuple[str, int], partner: str) -> bool:
        host, rail = end
        key = (host, partner, rail) if order[host] < order[partner] else (partner, host, rail)
        return key in confirmed

    slow_ends = _slow_endpoints(partners, is_low)

    suspects: list[Suspect] = []
    pair_median = {
        host: stats.median([v for (a, b, _), v in best.items() if host in (a, b)]) if any(
            host in (a, b) for a, b, _ in best) else None
        for host in hosts
    }
    for host in hosts:
        rails_measured = sorted(rail for (h, rail) in partners if h == host)
        slow_rails = [rail for rail in rails_measured if (host, rail) in slow_ends]
        reasons, measured, reference = [], None, None
        if slow_rails and slow_rails == rails_measured:
            partner_set = {p for rail in rails_measured for p in partners[(host, rail)]}
            slow_with = {p for rail in rails_measured for p in partners[(host, rail)] if is_low((host, rail), p)}
            measured, reference = pair_median[host], pair_fleet.median_gbps
            reasons.append(
                f"pair busbw {gbps(measured)} GB/s with {len(slow_with)} of {len(partner_set)} partners, "
                + _versus(measured, reference, expect_gbps)
            )
        elif slow_rails:
            suspects.extend(_rail_suspects(host, slow_rails, partners, best, is_low, pair_fleet, expect_gbps))
        if host in intra_confirmed:
            value = best_intra[host]
            if measured is None:
                measured, reference = value, intra_fleet.median_gbps
            reasons.append(
                f"intra-node all_reduce busbw {gbps(value)} GB/s{_attempts_text(intra[host])}, "
                + _versus(value, intra_fleet.median_gbps, None)
            )
        if reasons:
            suspects.append(Suspect("node", (host,), None, measured, reference, "; ".join(reasons)))

    suspects.extend(_links(best, pairs, confirmed, slow_ends, pair_median, pair_fleet, expect_gbps, hosts))
    suspects.sort(key=lambda s: ({"node": 0, "rail": 1, "link": 2}[s.kind], [order[h] for h in s.hosts], s.rail or 0))

    named = {h for s in suspects if s.kind in ("node", "rail") for h in s.hosts}
    node_rows = [
        NodeVerdict(host, tuple(ranks), best_intra.get(host), pair_median[host], SUSPECT if host in named else OK)
        for host, ranks in layout
    ]
    pair_rows = [
        PairVerdict((a, b), rail, best[(a, b, rail)], tuple(pairs[(a, b, rail)]), (a, b, rail) in low,
                    SUSPECT if (a, b, rail) in confirmed else OK)
        for a, b, rail in sorted(best, key=lambda k: (order[k[0]], order[k[1]], k[2]))
    ]
    if len(hosts) == 2 and best and expect_gbps is None:
        notes.append(f"two nodes: their pair has no fleet to be judged against; give {option_usage('expect_gbps')} "
                     "for a floor")
    notes.extend(_spread_notes(pair_fleet, intra_fleet, tolerance))
    measured_once = {key for key in low if len(pairs[key]) < 2}
    retest_pairs = sorted({(a, b) for a, b, _ in measured_once}, key=lambda p: (order[p[0]], order[p[1]]))
    return Judgement(
        nodes=node_rows, pairs=pair_rows, suspects=suspects, pair_fleet=pair_fleet, intra_fleet=intra_fleet,
        pair_threshold_gbps=threshold, intra_threshold_gbps=intra_judged.threshold, retest_pairs=retest_pairs,
        retest_intra=sorted(intra_judged.low - intra_confirmed, key=order.__getitem__), notes=notes,
        repeat=noise,
    )


def _slow_endpoints(partners: Mapping[tuple[str, int], Mapping[str, float]], is_low) -> set[tuple[str, int]]:
    """Endpoints low with all of (>= 2) partners, then, worst first, with most of the healthy rest."""
    slow = {
        end for end, found in partners.items()
        if len(found) >= MIN_PARTNERS_FOR_NODE and all(is_low(end, p) for p in found)
    }
    while True:
        worst, worst_share = None, MAJORITY
        for end in sorted(partners, key=lambda e: (e[1], e[0])):
            if end in slow:
                continue
            healthy = [p for p in partners[end] if (p, end[1]) not in slow]
            lows = sum(is_low(end, p) for p in healthy)
            if lows >= MIN_PARTNERS_FOR_NODE and lows / len(healthy) > worst_share:
                worst, worst_share = end, lows / len(healthy)
        if worst is None:
            return slow
        slow.add(worst)


def _links(best, pairs, confirmed, slow_ends, pair_median, pair_fleet, expect_gbps, hosts) -> list[Suspect]:
    """Confirmed low pairs whose two endpoints are fine: the link between them is at fault."""
    by_pair: dict[tuple[str, str], list[int]] = {}
    for a, b, rail in confirmed:
        if (a, rail) not in slow_ends and (b, rail) not in slow_ends:
            by_pair.setdefault((a, b), []).append(rail)
    out = []
    for (a, b), rails in by_pair.items():
        measured_rails = sorted(r for (x, y, r) in best if (x, y) == (a, b))
        groups = [(None, sorted(rails))] if sorted(rails) == measured_rails else [(r, [r]) for r in sorted(rails)]
        for rail, members in groups:
            value = stats.median([best[(a, b, r)] for r in members])
            attempts = pairs[(a, b, members[0])] if len(members) == 1 else ()
            out.append(Suspect(
                "link", (a, b), rail, value, pair_fleet.median_gbps,
                f"pair busbw {gbps(value)} GB/s{_attempts_text(attempts)}; {_others(a, b, best)}, "
                + _versus(value, pair_fleet.median_gbps, expect_gbps)
                + ("" if len(hosts) > 2 else "; with two nodes a slow pair cannot be pinned on either node"),
            ))
    return out


def _others(a: str, b: str, best) -> str:
    """How each end of a slow pair does with its other partners: the evidence that it is the link."""
    parts = []
    for host, other in ((a, b), (b, a)):
        values = [v for (x, y, _), v in best.items() if host in (x, y) and other not in (x, y)]
        if values:
            parts.append(f"{host} {gbps(stats.median(values))} GB/s")
    if not parts:
        return "neither node has another partner"
    return "with their other partners " + " and ".join(parts)
