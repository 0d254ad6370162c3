"""What a replay runs on the launch's ranks: the job's distinct collectives, in the order the job first
called each, each on the ranks that stand in for its process group (pure: a trace and a rank count in).

One rank's trace is replayed: the lowest rank read (a job's ranks call the same collectives; the
other files count in the profile). Each distinct (op, size, dtype, group) is one point, timed alone
as a sweep times a point, so its replayed time is what this fabric gives that collective with nothing
else running; the job's calls of it are counted, not run one by one.

A process group of the trace becomes ranks of the launch: its own global ranks where the launch has
them all, else the launch's first ranks, as many as the group has (a job's 4-rank group [4, 5, 6, 7]
replays on ranks 0-3 of a 4-rank launch). A group larger than the launch is refused before any rank
starts: "needs 128 ranks; this launch has 2". A point-to-point exchange runs on the replayed rank and its
peers, each message between the launch ranks that stand in for the trace's (from, to) ranks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from nccl_bench.errors import UserInputError
from nccl_bench.ranks import devices, graph_capture
from nccl_bench.ranks.split import ranks_text
from nccl_bench.replay.replay_config import option_name
from nccl_bench.replay.trace_reader import CollectiveCall, RankTrace
from nccl_bench.units import op_table
from nccl_bench.units.stats import median

# The element types a replay can make buffers of, with their bytes: torch's names, as the trace
# vocabulary writes them. A collective of another type (bool, float8, complex) is left out, named.
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
                 "int32": 4, "int64": 8}


@dataclass(frozen=True)
class ReplayPoint:
    """One distinct collective of the job, as the launch replays it."""

    op: str
    size_bytes: int
    dtype: str
    group_size: int
    ranks: tuple[int, ...]  # the launch's global ranks that run it, in group order
    calls: int  # how often the replayed rank called it in the traced window
    job_time_us: float | None  # the median time per call in the job (None: the trace has no time for it)
    # sendrecv: each message as (from, to) ranks of the launch; (): the sweep's ring over `ranks`
    transfers: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> tuple[str, int, str, int]:
        """(op, size, dtype, group size): the profile's row key without the trace's ranks, which the
        launch's ranks stand in for."""
        return self.op, self.size_bytes, self.dtype, self.group_size

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    def buffer_elems(self) -> tuple[int, int]:
        """(send, receive) elements of one rank's buffers, as a sweep makes them for this size; an exchange
        receives each of a rank's messages into a part of its own."""
        send, recv = op_table.buffer_elems(op_table.OPS[self.op], self.size_bytes, self.element_bytes, self.group_size)
        receives = [to for _, to in self.transfers]
        return send, recv * max((receives.count(rank) for rank in receives), default=1)

    def buffer_bytes(self) -> int:
        send, recv = self.buffer_elems()
        return (send + recv) * self.element_bytes


TRACE_SOURCE = "trace:"  # how a replayed row's `source` starts; a sweep's rows have none

# What a replay short of memory can do: its buffers are the job's largest collective, which no option lowers.
MEMORY_REMEDY = "its buffers are the traces' largest collective: free memory, or replay where there is more"


@dataclass(frozen=True)
class ReplayPlan:
    points: tuple[ReplayPoint, ...]  # in the order the job first called each
    source: str  # the rows' `source`: "trace:FILE" of the replayed rank's trace
    left_out: tuple[str, ...]  # collectives that cannot be replayed, each with why

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Every distinct set of ranks a point runs on, in order of first use."""
        return tuple(dict.fromkeys(point.ranks for point in self.points))

    @property
    def digest(self) -> str:
        """What the ranks run, in order, as one hash: ranks whose digests differ would make different
        groups or call different collectives, and hang or pair up wrongly (replay_body.py compares them
        before the first group is made)."""
        runs = [(point.op, point.size_bytes, point.dtype, point.ranks, point.transfers) for point in self.points]
        return hashlib.sha256(json.dumps(runs).encode()).hexdigest()[:16]

    @property
    def bytes_per_rank(self) -> int:
        """The largest point's buffers: one point's buffers exist at a time."""
        return max((point.buffer_bytes() for point in self.points), default=0)


def replayed_trace(traces: list[RankTrace]) -> RankTrace:
    """The trace whose collectives are replayed: the lowest rank's, or the first file's where none says."""
    return min(traces, key=lambda trace: (trace.rank is None, trace.rank or 0))


def ranks_needed(trace: RankTrace) -> int:
    """The most ranks any of the trace's collectives runs on; a collective on the world of a trace that
    does not say the world's size is refused, naming what the trace lacks (never guessed as 1 rank)."""
    unsized = next((call for call in trace.calls if call.group_size is None), None)
    if unsized is not None:
        raise UserInputError(str(trace.path), f"its {unsized.op} runs on the whole world, and the trace does not "
                                              "say how many ranks that is: give the job's traces with their "
                                              "distributedInfo (world_size), as torch.profiler writes them")
    return max((call.group_size for call in trace.calls), default=1)


def refuse_too_few_ranks(trace: RankTrace, world_size: int) -> None:
    """A group larger than the launch cannot be rebuilt: one line, before anything starts."""
    needed = ranks_needed(trace)
    if needed > world_size:
        largest = max(trace.calls, key=lambda call: call.group_size or 1)
        raise UserInputError(str(trace.path), f"its {largest.op} runs on a group of {needed} ranks: needs {needed} "
                                              f"ranks; this launch has {world_size}")


def launch_ranks(group_size: int | None, group_ranks: tuple[int, ...] | None, world_size: int) -> tuple[int, ...]:
    """The launch's ranks for a group of the trace (module docstring); the group fits, as checked first."""
    size = group_size or 1
    own = group_ranks
    if own and len(own) == size and len(set(own)) == size and max(own) < world_size and min(own) >= 0:
        return tuple(sorted(own))  # a group's ranks in rank order, as torch numbers them within it
    return tuple(range(size))


def points_for_launch(trace: RankTrace, world_size: int) -> ReplayPlan:
    """The points of `trace` on a launch of `world_size` ranks; UserInputError where a group does not fit."""
    refuse_too_few_ranks(trace, world_size)
    found: dict[tuple, list[CollectiveCall]] = {}
    why_not: dict[str, int] = {}
    for call in trace.calls:
        reason = _why_not_replayed(call)
        if reason is not None:
            why_not[reason] = why_not.get(reason, 0) + 1
            continue
        ranks = launch_ranks(call.group_size, call.group_ranks, world_size)
        transfers = _launch_transfers(call, ranks)
        found.setdefault((call.op, call.size_bytes or 0, call.dtype or "float32", ranks, transfers), []).append(call)
    points = []
    for (op, size_bytes, dtype, ranks, transfers), calls in found.items():
        times = [call.job_time_us for call in calls if call.job_time_us is not None]
        points.append(ReplayPoint(op, size_bytes, dtype, len(ranks), ranks, len(calls),
                                  median(times) if times else None, transfers))
    left_out = tuple(f"{count} call(s) not replayed: {reason}" for reason, count in why_not.items())
    if not points:
        raise UserInputError(str(trace.path), "nothing to replay: " + "; ".join(left_out))
    return ReplayPlan(tuple(points), source_of(trace), left_out)


def uncaptured_ops(plan: ReplayPlan, cuda_graph: int, backend: str, torch_version: str | None) -> dict[str, str]:
    """--cuda-graph against what the replay runs, as the sweep's plan checks it: refused on CPU; each op a
    CUDA graph cannot capture here, with why (its rows are marked unsupported with it); refused where that
    is every op of the traces."""
    graph_capture.refuse_gpu_only({"cuda_graph": cuda_graph}, backend)
    ops = list(dict.fromkeys(point.op for point in plan.points))
    on_gpu = devices.device_kind(backend) == "cuda"
    return graph_capture.graph_exclusions(cuda_graph, ops, on_gpu, torch_version, option_name("cuda_graph"),
                                          f"the traces' collectives ({', '.join(ops)})")


def _launch_transfers(call: CollectiveCall, ranks: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """An exchange's messages between the launch's ranks: the trace's k-th lowest rank of the exchange is
    the launch's k-th rank of `ranks`."""
    if not call.transfers or not call.group_ranks:
        return ()
    stand_in = dict(zip(sorted(call.group_ranks), ranks, strict=True))
    return tuple((stand_in[src], stand_in[dst]) for src, dst in call.transfers)


def group_label(ranks: tuple[int, ...], world_size: int) -> str:
    """A point's `group` column: "" for the launch's whole world, else "ranks 0,4" or "ranks 0-3"; a
    replayed row and its profile row are joined by it (replay/profile.with_replay)."""
    return "" if len(ranks) == world_size else f"ranks {ranks_text(ranks)}"


def plans_disagree(plans: list[tuple[str, str]]) -> str | None:
    """Each rank's (plan digest, trace source), by rank -> None where every rank has one plan, else the
    problem in one line naming which ranks replay which traces, the lowest rank's first."""
    by_digest: dict[str, list[int]] = {}
    for rank, (digest, _) in enumerate(plans):
        by_digest.setdefault(digest, []).append(rank)
    if len(by_digest) == 1:
        return None
    parts = []
    for ranks in by_digest.values():
        sources = ", ".join(dict.fromkeys(plans[rank][1].removeprefix("trace:") for rank in ranks))
        parts.append(f"rank{'s' if len(ranks) > 1 else ''} {ranks_text(tuple(ranks))} planned from {sources}")
    return ("the ranks were given traces that plan different replays (" + "; ".join(parts)
            + "): give every rank the same trace files")


def source_of(trace: RankTrace) -> str:
    """`trace:FILE`, the file's name made printable: it lands in results.csv and on terminals."""
    name = "".join(ch if ch.isprintable() else "?" for ch in trace.path.name)
    return f"{TRACE_SOURCE}{name}"


def _why_not_replayed(call: CollectiveCall) -> str | None:
    collective = op_table.OPS.get(call.op)
    if collective is None:
        return f"{call.op} is no collective nccl_bench runs"
    if call.ranks_cut:
        return (f"{call.op} on a group of {call.group_size} ranks whose ranks the trace cuts short (torch's "
                "profiler writes 30) and its distributedInfo pg_config does not list")
    if not collective.moves_data:  # barrier: no buffer, no size
        return None
    if call.size_bytes is None or call.dtype is None:
        return f"{call.op} without a size in the trace (profiled without record_shapes)"
    if call.dtype not in ELEMENT_BYTES:
        return f"{call.op} of {call.dtype} (no buffers of that type are made)"
    if call.size_bytes % ELEMENT_BYTES[call.dtype]:
        return f"{call.op} of {call.size_bytes} bytes is not whole {call.dtype} elements"
    return None
