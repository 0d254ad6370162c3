"""Where each rank stood when a run stalled (pure): its last completed and its current point, grouped
into rank ranges, and torch's flight recorder read the way torch's own fr_trace analyzer reads it.

A rank's position is a point's sequence number on that rank (1 for its first point), op, size and
group; ranks that stood alike are one group ("ranks 0-2,4-7"), and the line stays bounded however
many ranks and states there are (1,024 ranks of 1,024 different states: a few hundred characters).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Iterable

from nccl_bench.units.hostlist import number_ranges
from nccl_bench.units.sizes import format_size

# The most rank ranges written for one group, and the most groups in one line: past these the line
# counts what it leaves out (meta.json keeps every group).
MAX_RANGES = 8
MAX_STATES = 4


@dataclass(frozen=True)
class Position:
    """One point of a rank: its sequence number on the rank, op, size (None: no size) and group
    (None: the whole world)."""

    seq: int
    op: str
    size_bytes: int | None = None
    group: str | None = None

    def text(self) -> str:
        size = "" if self.size_bytes is None else f" {format_size(self.size_bytes)}"
        group = "" if self.group is None else f" on {self.group}"
        return f"#{self.seq} {self.op}{size}{group}"


@dataclass(frozen=True)
class Standing:
    """A rank's last completed point and the point it is in (None: none yet / between points)."""

    last: Position | None = None
    current: Position | None = None

    def text(self) -> str:
        done = "completed none" if self.last is None else f"last completed {self.last.text()}"
        return done if self.current is None else f"{done}, in {self.current.text()}"

    def encode(self) -> str:
        return json.dumps({"last": _plain(self.last), "current": _plain(self.current)})


def _plain(position: Position | None) -> dict | None:
    return None if position is None else asdict(position)


def decode(text: str) -> Standing | None:
    """A Standing from what encode wrote; None for anything else (a note from another version)."""
    try:
        found = json.loads(text)
        return Standing(*(None if found[key] is None else Position(**found[key]) for key in ("last", "current")))
    except (ValueError, TypeError, KeyError):
        return None


def rank_ranges(ranks: Iterable[int], limit: int | None = None) -> str:
    """'0-2,4-7': ranks as ranges; with `limit`, the first limit-1 ranges, '...' and the last."""
    parts = number_ranges(sorted(set(ranks))).split(",")
    if limit is not None and len(parts) > limit:
        parts = [*parts[:limit - 1], "...", parts[-1]]
    return ",".join(parts)


def _who(ranks: list[int]) -> str:
    text = rank_ranges(ranks, MAX_RANGES)
    return f"rank {text}" if len(ranks) == 1 else f"ranks {text}" + (f" ({len(ranks)} ranks)" if "..." in text else "")


def _states(standings: dict[int, Standing | None]) -> list[tuple[Standing | None, list[int]]]:
    """Ranks grouped by where they stood, the smallest group first (the odd one out is the news),
    then by lowest rank; ranks that said nothing last."""
    found: dict[Standing | None, list[int]] = {}
    for rank in sorted(standings):
        found.setdefault(standings[rank], []).append(rank)
    return sorted(found.items(), key=lambda item: (item[0] is None, len(item[1]), item[1][0]))


def stood_line(standings: dict[int, Standing | None]) -> str:
    """'rank 1 last completed #1 all_reduce 1K, in #2 all_reduce 2K; ranks 0,2-3 ...': one clause per
    state, at most MAX_STATES; a rank mapped to None said nothing (it died, froze, or its store note
    was lost)."""
    states = _states(standings)
    clauses = [f"{_who(ranks)} " + ("said nothing" if state is None else state.text())
               for state, ranks in states[:MAX_STATES]]
    rest = [rank for _, ranks in states[MAX_STATES:] for rank in ranks]
    if rest:
        clauses.append(f"{len(rest)} more ranks in {len(states) - MAX_STATES} other states")
    return "; ".join(clauses)


def stood_meta(standings: dict[int, Standing | None]) -> list[dict]:
    """meta.json's form: every state once, with its ranks as ranges."""
    return [{"ranks": rank_ranges(ranks), "last_completed": _plain(state.last) if state else None,
             "current": _plain(state.current) if state else None, **({} if state else {"said": "nothing"})}
            for state, ranks in _states(standings)]


# -- torch's flight recorder ------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupRecord:
    """One process group in one rank's flight recorder: the last collective it enqueued and the last
    that completed (torch's pg_status; collective_seq_id counts from 1, -1: none yet)."""

    group: str
    enqueued: int
    completed: int
    last_op: str = ""  # the profiling name of the group's last entry ("gloo:all_reduce")


def recorder_line(records: dict[int, list[GroupRecord]]) -> str:
    """Each group's ranks by the last collective they enqueued, and the culprit as torch's fr_trace
    names it: the ranks that never joined the collective the others are in ("Not all ranks joining
    collective"). records: rank -> its groups (ranks that sent nothing are left out)."""
    by_group: dict[str, dict[int, GroupRecord]] = {}
    for rank, groups in sorted(records.items()):
        for record in groups:
            by_group.setdefault(record.group, {})[rank] = record
    stuck, done = [], []
    for name, ranks in by_group.items():
        top = max(record.enqueued for record in ranks.values())
        behind = sorted(rank for rank, record in ranks.items() if record.enqueued < top)
        unfinished = any(record.completed < record.enqueued for record in ranks.values())
        op = next((r.last_op for r in ranks.values() if r.enqueued == top and r.last_op), "")
        verb = "enqueued" if behind or unfinished else "completed"
        clause = f"group {name}: #{top}{' ' + op if op else ''} {verb} by {_who(sorted(set(ranks) - set(behind)))}"
        if behind:
            lowest = min(ranks[rank].enqueued for rank in behind)
            clause += f", not joined by {_who(behind)} (last enqueued #{lowest})"
        (stuck if verb == "enqueued" else done).append(((0, len(behind)) if behind else (1, 0), clause))
    # where the run stands first: groups that miss ranks, the fewest missing (the most precise) first;
    # then groups whose ranks are all inside a collective; then groups with nothing unfinished
    clauses = [clause for _, clause in sorted(stuck, key=lambda item: item[0])] + [clause for _, clause in done]
    shown = clauses[:MAX_STATES]
    return "; ".join(shown + ([f"{len(clauses) - len(shown)} more groups"] if len(clauses) > len(shown) else []))


def culprits(records: dict[int, list[GroupRecord]]) -> list[int]:
    """The ranks behind in some group (fr_trace's missing ranks), lowest first."""
    found: set[int] = set()
    by_group: dict[str, dict[int, int]] = {}
    for rank, groups in records.items():
        for record in groups:
            by_group.setdefault(record.group, {})[rank] = record.enqueued
    for ranks in by_group.values():
        top = max(ranks.values())
        found.update(rank for rank, enqueued in ranks.items() if enqueued < top)
    return sorted(found)


def encode_records(records: list[GroupRecord] | str) -> str:
    """A rank's flight-recorder groups for the store, or the sentence that says why there are none."""
    return json.dumps(records if isinstance(records, str) else [asdict(record) for record in records])


def decode_records(text: str) -> list[GroupRecord] | str | None:
    """What encode_records wrote; None for anything else."""
    try:
        found = json.loads(text)
        return found if isinstance(found, str) else [GroupRecord(**record) for record in found]
    except (ValueError, TypeError):
        return None
