"""Who left and why, through the rendezvous store: the roll call after a failure or a signal.

A collective can no longer be trusted once one has failed, so ranks leave notes in the launcher's
store instead: why each rank left, and each rank's host and pid (a peer on the same host can then
tell a dead process from a stopped or a running one).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import time

from nccl_bench.ranks.dist import DistContext, hostname

ROLL_CALL_POLL_S = 0.1  # store polling after a failure: quick to notice the last live rank, cheap
LEFT_ON_SIGNAL = "signal"
# What became of a rank after its deadline aborted the process group (ranks/deadline.py): its main
# thread came back (it was waiting on a peer, and the abort released it), or it never did (the stall
# is its own). A rank that never says either, within the wait, counts as never having come back.
CAME_BACK, STUCK = "came back", "stuck"


def _leaving_key(rank: int) -> str:
    return f"nccl_bench/leaving/{rank}"


def _process_key(rank: int) -> str:
    return f"nccl_bench/process/{rank}"


def roll_call(ctx: DistContext, wait_s: float) -> tuple[list[int], list[int]] | None:
    """After a failure or signal: mark this rank as leaving, then (ranks that left too, the others).

    Uses the rendezvous store rather than a collective, which can no longer be trusted. Under
    torchrun the store lives in the launcher agent, so it outlives any rank. None = unreachable.
    """
    mark_leaving(ctx)
    keys = [_leaving_key(rank) for rank in range(ctx.world_size)]
    try:
        store = _store(ctx)
        deadline = time.monotonic() + wait_s
        while True:
            present = [rank for rank, key in enumerate(keys) if store.check([key])]
            if len(present) == ctx.world_size or time.monotonic() >= deadline:
                return present, [rank for rank in range(ctx.world_size) if rank not in present]
            time.sleep(ROLL_CALL_POLL_S)
    except Exception:  # the store went with a dead rank (env:// hosts it in rank 0)
        return None


def await_leaving(ctx: DistContext, rank: int, limit_s: float) -> bool:
    """Until `rank` has said in the store why it left, or (on this host) is no longer running; False
    past limit_s or without a store.

    A rank that leaves the report of a failure to a peer must not exit first: its exit makes the
    launcher (torchrun, the local workers' agent) SIGTERM that peer, which then ends without saying
    anything, and the run fails with no line at all."""
    deadline = time.monotonic() + limit_s
    try:
        store = _store(ctx)
        while time.monotonic() < deadline:
            if store.check([_leaving_key(rank)]):
                return True
            if local_peer_states(ctx).get(rank, "running") != "running":
                return True
            time.sleep(ROLL_CALL_POLL_S)
    except Exception:  # the store went with the rank that hosted it
        return False
    return False


def _after_abort_key(rank: int) -> str:
    return f"nccl_bench/after_abort/{rank}"


def _store(ctx: DistContext | None = None):
    """The launcher's store: the one the context holds (it outlives an abort of every group, which
    forgets the default group), else the default group's."""
    if ctx is not None and ctx.store is not None:
        return ctx.store
    import torch.distributed as dist

    return dist.distributed_c10d._get_default_store()


def store_of(ctx: DistContext):
    """The launcher's store, where the roll call's notes live (it outlives an abort of every group)."""
    return _store(ctx)


def mark_after_abort(ctx: DistContext, state: str) -> None:
    """This rank's main thread came back from the abort (CAME_BACK) or did not (STUCK)."""
    with contextlib.suppress(Exception):
        _store(ctx).set(_after_abort_key(ctx.rank), state)


def after_abort(ctx: DistContext, ranks: list[int], wait_s: float) -> dict[int, str]:
    """CAME_BACK or STUCK for each of `ranks` (peers whose deadline ran out), waiting up to wait_s for
    them to say; a rank that does not say by then, or whose process on this host is gone, is STUCK.

    The wait covers a peer's grace period (deadline.GRACE_S): it says STUCK when that ends, and
    CAME_BACK as soon as its main thread is back, which a rank released by the abort is at once."""
    found: dict[int, str] = {}
    limit = time.monotonic() + wait_s
    try:
        store = _store(ctx)
        while True:
            for rank in ranks:
                if rank not in found and store.check([_after_abort_key(rank)]):
                    found[rank] = store.get(_after_abort_key(rank)).decode(errors="replace")
            for rank, pid in _local_pids(ctx, set(ranks) - set(found)).items():
                if process_state(pid) in (None, "Z"):
                    found[rank] = STUCK  # it died without coming back
            if len(found) == len(ranks) or time.monotonic() >= limit:
                break
            time.sleep(ROLL_CALL_POLL_S)
    except Exception:  # the store went with the rank that hosted it: nobody said
        pass
    return {rank: found.get(rank, STUCK) for rank in ranks}


def _local_pids(ctx: DistContext, ranks: set[int]) -> dict[int, int]:
    """Process ids of those of `ranks` that run on this host."""
    pids, store, me = {}, _store(ctx), hostname()
    for rank in sorted(ranks):
        if store.check([_process_key(rank)]):
            host, pid = store.get(_process_key(rank)).decode().rsplit(" ", 1)
            if host == me:
                pids[rank] = int(pid)
    return pids


def publish_process(rank: int) -> None:
    """Host and pid of this rank in the store, so a peer on the same host can tell if it died."""
    with contextlib.suppress(Exception):
        _store().set(_process_key(rank), f"{hostname()} {os.getpid()}")


def mark_leaving(ctx: DistContext, why: str = LEFT_ON_SIGNAL, replace: bool = False) -> None:
    """This rank stops on purpose: peers must not take it for a crash, and may read why (a signal, or
    the one-line failure it saw, which a peer that only saw the consequence reports instead). replace:
    a failure line recorded first was the signal's consequence after all."""
    with contextlib.suppress(Exception):
        store = _store(ctx)
        store.set_timeout(_dt.timedelta(seconds=5))  # a store that went away must not hold us for --timeout
        key = _leaving_key(ctx.rank)
        if why == LEFT_ON_SIGNAL and not replace and store.check([key]):
            return  # a failure recorded first stays: the signal that followed it is its consequence
        store.set(key, why)


def note_leaving(store, rank: int, why: str) -> None:
    """mark_leaving before a DistContext exists (a stalled set-up step), on the rendezvous store itself."""
    store.set(_leaving_key(rank), why)


def leaving_reasons(ctx: DistContext) -> dict[int, str]:
    """Why each other rank that left on purpose left (LEFT_ON_SIGNAL or its failure line)."""
    found: dict[int, str] = {}
    with contextlib.suppress(Exception):
        store = _store(ctx)
        for rank in range(ctx.world_size):
            key = _leaving_key(rank)
            if rank != ctx.rank and store.check([key]):
                found[rank] = store.get(key).decode(errors="replace")
    return found


def local_peer_states(ctx: DistContext) -> dict[int, str]:
    """Other ranks on this host that did not leave on purpose: rank -> "running", or what befell it."""
    found: dict[int, str] = {}
    try:
        store, me = _store(ctx), hostname()
        for rank in range(ctx.world_size):
            if rank == ctx.rank or not store.check([_process_key(rank)]):
                continue
            host, pid = store.get(_process_key(rank)).decode().rsplit(" ", 1)
            if host != me or store.check([_leaving_key(rank)]):
                continue
            state = process_state(int(pid))
            if state in (None, "Z"):
                found[rank] = f"process {pid} died"
            elif state == "T":
                found[rank] = f"process {pid} is stopped"
            else:
                found[rank] = "running"
    except Exception:  # best effort: the store may be gone with rank 0
        pass
    return found


def process_state(pid: int) -> str | None:
    """Linux state letter of a process (R, S, T, Z...), None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


