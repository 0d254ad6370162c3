"""Where each rank stood: its last completed and its current point, kept in memory per point (never
per op, never inside a timed loop), and told through the rendezvous store when the run stalls.

A stalled collective cannot carry anything, but the launcher's store still answers (ranks/roll_call.py):
every rank that takes part in a failure's mapping (faults.why_stopped), and a stalled rank's deadline
thread (faults.record_stall), writes its standing and its flight recorder's groups there before it
says it is leaving, so a rank present at the roll call has said where it stood. Keys carry the run's
nonce (rank 0's, gathered with the common header), so a later --nccl-env variant or a restarted
attempt on the same store never reads an earlier run's. A rank that died or froze says nothing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from typing import Any

from nccl_bench.ranks import flight_recorder, roll_call
from nccl_bench.units import rank_positions as rp
from nccl_bench.units.rank_positions import Position, Standing

STORE_PREFIX = "nccl_bench/stood"
STORE_WAIT_S = 5.0  # as the roll call's notes (roll_call.mark_leaving)


class Positions:
    """This rank's points: begin() as a point starts, end() when it is over. One attribute write per
    point: nothing on the measured path."""

    def __init__(self, backend: str = ""):
        self.backend = backend
        self.nonce = ""  # rank 0's, from the common header: set before the first point
        self.seq = 0
        self.standing = Standing()
        self.stood: dict[str, Any] = {}  # meta.json's "stood" and "flight_recorder", once gathered
        self._recorded = False  # this rank's flight recorder is in the store

    def begin(self, op: str, size_bytes: int | None = None, group: str | None = None) -> None:
        self.seq += 1
        self.standing = Standing(self.standing.last, Position(self.seq, op, size_bytes, group))

    def end(self) -> None:
        if self.standing.current is not None:
            self.standing = Standing(self.standing.current, None)

    # -- through the store -----------------------------------------------------------------------
    def _key(self, kind: str, rank: int) -> str:
        return f"{STORE_PREFIX}/{self.nonce}/{kind}/{rank}"

    def publish(self, ctx) -> None:
        """This rank's standing and flight recorder in the store (best effort: the store may be gone)."""
        with contextlib.suppress(Exception):
            store = roll_call.store_of(ctx)
            store.set_timeout(_dt.timedelta(seconds=STORE_WAIT_S))  # a store gone must not hold the report
            store.set(self._key("standing", ctx.rank), self.standing.encode())
            if not self._recorded:  # once: the first is read before any abort, while the groups are known
                store.set(self._key("recorder", ctx.rank), rp.encode_records(flight_recorder.records(self.backend)))
                self._recorded = True

    def gather(self, ctx) -> tuple[str, str]:
        """(where the ranks stood, the flight recorder's line) from every rank's notes; keeps both for
        meta.json. Ranks without a note said nothing."""
        standings: dict[int, Standing | None] = {}
        recorded: dict[int, Any] = {}
        try:
            store = roll_call.store_of(ctx)
        except Exception:  # no store left: every rank said nothing
            store = None
        for rank in range(ctx.world_size):
            standings[rank] = _read(store, self._key("standing", rank), rp.decode)
            recorded[rank] = _read(store, self._key("recorder", rank), rp.decode_records)
        groups = {rank: found for rank, found in recorded.items() if isinstance(found, list)}
        why_not = next((found for found in recorded.values() if isinstance(found, str)), None)
        if groups:
            line = f"flight recorder ({self.backend}): {rp.recorder_line(groups)}"
            recorder = {"line": line, "culprits": rp.culprits(groups), "ranks": sorted(groups)}
        else:
            line = f"flight recorder: {why_not or 'no rank sent its recorder'}"
            recorder = {"line": line}
        self.stood = {"stood": rp.stood_meta(standings), "flight_recorder": recorder}
        return rp.stood_line(standings), line

    def meta(self) -> dict[str, Any]:
        """meta.json's keys: where the ranks stood, once a stall gathered it; torch's recorder, or why none."""
        if self.stood:
            return dict(self.stood)
        why_not = flight_recorder.availability(self.backend) if self.backend else None
        return {"flight_recorder": {"line": f"flight recorder: {why_not}"}} if why_not else {}


def _read(store, key: str, parse):
    if store is None:
        return None
    try:
        return parse(store.get(key).decode(errors="replace")) if store.check([key]) else None
    except Exception:  # the store went with the rank that hosted it
        return None
