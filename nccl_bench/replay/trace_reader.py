"""One rank's profiler trace read into its collectives, in the job's order, each with what nccl-tests
would call its size and the time it took inside the job.

Where a collective is read from (its "anchor" event), by the first kind the trace holds:

1. `record_param_comms` CPU ops whose `Collective name` names a collective (torch 2.1 on): op, element
   counts (`In msg nelems`, `Out msg nelems`), `dtype`, `Group size`, `Process Group Ranks`, split
   sizes. Records that are no collective (`wait`) and older ones without arguments are not anchors.
2. Otherwise `nccl:*` and `gloo:*` annotations (older NCCL traces, gloo jobs): the op from the name,
   the size from `Input Dims` and `Input type` (present when the job was profiled with
   record_shapes=True). These traces do not name the group: an all_gather's or reduce_scatter's is the
   ratio of output to input of the `c10d::` op around its annotation on the same thread
   (`c10d::_allgather_base_(output, input)`, whose output is n times its input), and any other's the
   whole world.

The time a collective took in the job:
- NCCL: the summed duration of the NCCL kernels it launched, each given to its anchor by its `External id`
  or, failing that, through its launch (replay/kernel_matching.py).
- gloo: the `gloo:*` annotation's own duration: gloo runs the collective on its worker thread inside
  that annotation (the `c10d::` op on the caller's thread only enqueues it).
- An NCCL collective whose kernel the trace does not hold (cut off at the window's edge) has no time.

Point-to-point: torch's `batch_isend_irecv` opens a coalescing block (ncclGroupStart), writes one
`record_param_comms` per send and recv (each closed before any kernel exists), and launches the one NCCL
kernel in `endCoalescing`, inside the `nccl:coalesced` annotation of the block's Work
(ProcessGroupNCCL.cpp). That kernel belongs to the block: its sends and recvs on the same thread since
the previous collective or block are one exchange, one call, timed by the block's kernels. A send's peer
is its record's `Dst Rank`, a recv's its `Src Rank` (global ranks, torch's profiler util.cpp), and the
exchange runs on this rank and those peers; a lone send or recv is an exchange of its own. The traced
window is the span from the first event's start to the last event's end. The same pass gathers the GPU
activities for how much communication ran beside compute (replay/overlap.py): the window's figure and the
union of compute, which each call's kernels (their intervals kept) are set against.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from nccl_bench.replay.kernel_matching import match_kernels
from nccl_bench.replay.overlap import ActivityScan, Interval, Overlap
from nccl_bench.replay.trace_events import TraceError, stream_trace
from nccl_bench.replay.trace_values import (
    ANNOTATION_PREFIXES,
    Impossible,
    ProcessGroupInfo,
    as_int,
    as_text,
    check_call,
    count_at_least,
    cut_short,
    elements_of,
    event_args,
    input_elements,
    int_list,
    process_groups_of,
    usable_times,
)
from nccl_bench.replay.trace_vocabulary import (
    chunk_to_whole,
    dtype_of,
    is_nccl_kernel,
    nccl_tests_elements,
    op_of_name,
)

RECORD_PARAM_COMMS = "record_param_comms"
ANNOTATIONS = "annotations"
# The annotation of the Work that endCoalescing makes; a coalescing block's kernel is launched inside it.
COALESCED = "nccl:coalesced"
SENDRECV = "sendrecv"


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    """One collective as the job called it on this rank."""

    op: str  # units/op_table.OP_NAMES
    size_bytes: int | None  # nccl-tests' size (units/op_table.py); None where the trace gives no shapes
    dtype: str | None  # float32, bfloat16, ... (replay/trace_vocabulary.py); None where not given or not known
    group_size: int | None
    group_ranks: tuple[int, ...] | None  # global ranks of its process group; None: not named (the world)
    start_us: float  # when the CPU called it (trace clock): the job's order
    job_time_us: float | None  # how long it took in the job (module docstring); None: not in the trace
    process_group: str | None = None  # torch's name of the process group ("0" is the default group)
    in_split_sizes: tuple[int, ...] = ()  # all_to_allv's per-peer element counts
    out_split_sizes: tuple[int, ...] = ()
    ranks_cut: bool = False  # the trace cut its group's rank list short, and holds it nowhere whole
    # sendrecv: each message of the exchange as (from, to) global ranks; (): not a point-to-point call, or
    # one whose peers or own rank the trace does not name
    transfers: tuple[tuple[int, int], ...] = ()
    kernels: tuple[Interval, ...] = ()  # its NCCL kernels' (start, end), trace clock (NCCL traces)


@dataclass(frozen=True)
class RankTrace:
    """What one trace file says of its rank's communication."""

    path: Path
    backend: str | None
    rank: int | None
    world_size: int | None
    nccl_version: str | None
    process_groups: tuple[ProcessGroupInfo, ...]
    calls: tuple[CollectiveCall, ...]  # in the job's order
    source: str  # RECORD_PARAM_COMMS or ANNOTATIONS: which events the calls were read from
    window_us: float | None  # the traced window's length
    unmatched_kernels: int  # NCCL kernels no collective could be found for
    overlap: Overlap | None = None  # communication beside compute over the traced window (replay/overlap.py)
    compute: Sequence[Interval] = ()  # the union of the trace's compute kernels, in time order (overlap.Intervals)


def read_trace(path: Path | str) -> RankTrace:
    """The collectives of one rank's trace; TraceError for a file that is no trace, holds none, or holds
    a value no job can have (Impossible), before anything is measured or written."""
    stream = stream_trace(path)
    try:
        return _read(stream)
    except Impossible as exc:
        raise TraceError(stream.path, f"impossible value: {exc}") from None


def _read(stream) -> RankTrace:
    scan = _Scan()
    for event in stream:
        scan.add(event)
    info = stream.metadata.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    world_size = count_at_least(info, "world_size", "distributedInfo's world_size", least=1)
    rank = count_at_least(info, "rank", "distributedInfo's rank", least=0)
    if rank is not None and world_size is not None and rank >= world_size:
        raise Impossible(f"distributedInfo's rank is {rank}, in a world of {world_size}")
    scan.name_groups()
    process_groups = process_groups_of(info.get("pg_config"))
    _whole_groups(scan.rpc_anchors, process_groups)
    anchors, source = (scan.rpc_anchors, RECORD_PARAM_COMMS) if scan.rpc_anchors else (scan.annotations, ANNOTATIONS)
    if not anchors:
        raise TraceError(stream.path, "no collectives in it: no record_param_comms with a collective name, "
                                      "no nccl:* or gloo:* annotation")
    unmatched = match_kernels(anchors + scan.coalesced, scan.kernels, stream)
    anchors = _exchanges(anchors, scan.coalesced, rank)
    unmatched += sum(len(mark.kernels) for mark in scan.coalesced if not mark.used)
    calls = _calls(anchors, world_size, scan)
    for call in calls:
        check_call(call, world_size)
    backend = info.get("backend") if isinstance(info.get("backend"), str) else ("nccl" if scan.kernels_seen else None)
    return RankTrace(
        path=stream.path, backend=backend, rank=rank, world_size=world_size,
        nccl_version=info.get("nccl_version") if isinstance(info.get("nccl_version"), str) else None,
        process_groups=process_groups, calls=tuple(calls), source=source,
        window_us=scan.window_us(), unmatched_kernels=unmatched, overlap=scan.activity.overlap(),
        compute=scan.activity.compute())


@dataclass(slots=True)
class _Anchor:
    """A collective's anchor event, with what is needed to finish its CollectiveCall."""

    op: str
    pid: Any
    tid: Any
    start_us: float
    duration_us: float
    external_id: Any
    in_elements: int | None
    out_elements: int | None
    dtype: tuple[str, int] | None
    group_size: int | None  # None: the world's (annotations)
    group_ranks: tuple[int, ...] | None = None
    process_group: str | None = None
    in_splits: tuple[int, ...] = ()
    out_splits: tuple[int, ...] = ()
    ranks_cut: bool = False
    cpu_time_is_job_time: bool = False  # gloo: the annotation spans the collective's run
    kernels: list[tuple[float, float]] = field(default_factory=list)  # its NCCL kernels' (start, duration)
    peer: int | None = None  # a send's Dst Rank, a recv's Src Rank (global)
    is_send: bool = False
    transfers: tuple[tuple[int, int], ...] = ()  # an exchange's messages, (from, to)
    used: bool = False  # a coalescing block's mark whose kernels went to an exchange

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us

    def call(self, world_size: int | None) -> CollectiveCall:
        group_size = self.group_size if self.group_size is not None else world_size
        size_bytes = None
        if self.in_elements is not None and self.dtype is not None:
            elements = nccl_tests_elements(self.op, self.in_elements, self.out_elements, group_size)
            size_bytes = None if elements is None else elements * self.dtype[1]
        if self.kernels:
            job_time_us = math.fsum(duration for _, duration in self.kernels)
        else:
            job_time_us = self.duration_us if self.cpu_time_is_job_time else None
        group_ranks = self.group_ranks
        if self.transfers:  # an exchange runs on its own rank and its peers, whatever group carried it
            group_ranks = tuple(sorted({rank for transfer in self.transfers for rank in transfer}))
            group_size = len(group_ranks)
        return CollectiveCall(
            op=self.op, size_bytes=size_bytes, dtype=None if self.dtype is None else self.dtype[0],
            group_size=group_size, group_ranks=group_ranks, start_us=self.start_us, job_time_us=job_time_us,
            process_group=self.process_group, in_split_sizes=self.in_splits,
            out_split_sizes=self.out_splits, ranks_cut=self.ranks_cut and not self.transfers,
            transfers=self.transfers, kernels=tuple((start, start + duration) for start, duration in self.kernels))


class _Scan:
    """One pass over the events: anchors of both kinds, NCCL kernels, the window. Everything else is
    dropped as it passes; annotations are dropped for good once the trace shows record_param_comms
    anchors, which then are the collectives."""

    def __init__(self):
        self.rpc_anchors: list[_Anchor] = []
        self.annotations: list[_Anchor] = []
        # (pid, tid, start, end, group size) of c10d:: all_gather and reduce_scatter ops (module docstring)
        self.group_hints: list[tuple[Any, Any, float, float, int]] = []
        self.kernels: list[tuple[Any, Any, tuple[float, float]]] = []  # External id, correlation, (start, dur)
        self.kernels_seen = False
        self.coalesced: list[_Anchor] = []  # each coalescing block's nccl:coalesced annotation
        self.first_us = math.inf
        self.last_us = -math.inf
        self.activity = ActivityScan()

    def add(self, event: dict[str, Any]) -> None:
        self.activity.add(event)
        if event.get("ph") != "X":
            return
        start, duration = event.get("ts"), event.get("dur", 0)
        if not isinstance(start, (int, float)) or not isinstance(duration, (int, float)):
            return
        if not usable_times(event, start, duration):
            return
        self.first_us = min(self.first_us, start)
        self.last_us = max(self.last_us, start + duration)
        name = event.get("name")
        if not isinstance(name, str):
            return
        category = event.get("cat")
        if category == "kernel":
            if is_nccl_kernel(name):
                self._add_kernel(event, start, duration)
        elif name == RECORD_PARAM_COMMS:
            self._add_record_param_comms(event, start, duration)
        elif name == COALESCED:
            self.coalesced.append(_Anchor(
                op=COALESCED, pid=event.get("pid"), tid=event.get("tid"), start_us=start, duration_us=duration,
                external_id=event_args(event).get("External id"), in_elements=None, out_elements=None, dtype=None,
                group_size=None))
        elif not self.rpc_anchors:
            if category == "user_annotation" and name.startswith(ANNOTATION_PREFIXES):
                self._add_annotation(event, name, start, duration)
            elif category == "cpu_op" and name.startswith("c10d::"):
                self._add_group_hint(event, name, start, duration)

    def window_us(self) -> float | None:
        return self.last_us - self.first_us if self.last_us >= self.first_us else None

    def _add_kernel(self, event: dict[str, Any], start: float, duration: float) -> None:
        args = event_args(event)
        self.kernels.append((args.get("External id"), args.get("correlation"), (start, duration)))
        self.kernels_seen = True

    def _add_record_param_comms(self, event: dict[str, Any], start: float, duration: float) -> None:
        args = event_args(event)
        name = args.get("Collective name")
        if not isinstance(name, str):
            return
        in_splits, out_splits = int_list(args.get("In split size")) or (), int_list(args.get("Out split size")) or ()
        op = op_of_name(name, uneven_splits=bool(in_splits or out_splits))
        if op is None:
            return
        if not self.rpc_anchors:
            self.annotations.clear()
            self.group_hints.clear()
        dtype = args.get("dtype")
        if any(size < 0 for size in in_splits + out_splits):
            raise Impossible(f"a split size of {name} is negative")
        self.rpc_anchors.append(_Anchor(
            op=op, pid=event.get("pid"), tid=event.get("tid"), start_us=start, duration_us=duration,
            external_id=args.get("External id"), in_elements=elements_of(args, "In msg nelems", name),
            out_elements=elements_of(args, "Out msg nelems", name),
            dtype=dtype_of(dtype) if isinstance(dtype, str) else None,
            group_size=count_at_least(args, "Group size", f"the Group size of {name}", least=1),
            group_ranks=int_list(args.get("Process Group Ranks")),
            ranks_cut=cut_short(args.get("Process Group Ranks")),
            process_group=as_text(args.get("Process Group Name")), in_splits=in_splits, out_splits=out_splits,
            peer=_peer(name, args), is_send=name.lower() == "send",
        ))

    def _add_annotation(self, event: dict[str, Any], name: str, start: float, duration: float) -> None:
        op = op_of_name(name)
        if op is None:
            return
        elements, dtype = input_elements(event_args(event))
        self.annotations.append(_Anchor(
            op=op, pid=event.get("pid"), tid=event.get("tid"), start_us=start, duration_us=duration,
            external_id=event_args(event).get("External id"), in_elements=elements, out_elements=None, dtype=dtype,
            group_size=None, cpu_time_is_job_time=name.startswith("gloo:"),
        ))

    def _add_group_hint(self, event: dict[str, Any], name: str, start: float, duration: float) -> None:
        if not chunk_to_whole(op_of_name(name) or ""):
            return
        dims = event_args(event).get("Input Dims")
        shapes = dims[:2] if isinstance(dims, list) else []
        if len(shapes) < 2 or not all(isinstance(s, list) and s and all(as_int(n) for n in s) for s in shapes):
            return
        larger, smaller = sorted((math.prod(shape) for shape in shapes), reverse=True)
        if larger % smaller == 0:
            self.group_hints.append((event.get("pid"), event.get("tid"), start, start + duration, larger // smaller))

    def name_groups(self) -> None:
        """Give each annotation of an all_gather or reduce_scatter the group size of the c10d:: op around it."""
        hints: dict[tuple, list[tuple[float, float, int]]] = defaultdict(list)
        for pid, tid, start, end, group_size in sorted(self.group_hints, key=lambda hint: hint[2]):
            hints[pid, tid].append((start, end, group_size))
        for anchor in self.annotations:
            thread_hints = hints.get((anchor.pid, anchor.tid))
            if not chunk_to_whole(anchor.op) or not thread_hints:
                continue
            index = bisect.bisect_right(thread_hints, (anchor.start_us, math.inf, 0)) - 1
            if index >= 0 and anchor.end_us <= thread_hints[index][1]:
                anchor.group_size = thread_hints[index][2]


def _calls(anchors: list[_Anchor], world_size: int | None, scan: _Scan) -> list[CollectiveCall]:
    """The anchors' calls in the job's order. Each anchor is let go once its call is made, and the scan's
    lists of them first, so that the anchors and the calls, each as many as the collectives, are not all
    held at once."""
    scan.rpc_anchors, scan.annotations, scan.kernels = [], [], []
    anchors.reverse()
    calls = []
    while anchors:
        calls.append(anchors.pop().call(world_size))
    calls.sort(key=lambda call: call.start_us)
    return calls


def _exchanges(anchors: list[_Anchor], marks: list[_Anchor], rank: int | None) -> list[_Anchor]:
    """The anchors with each coalescing block's sends and recvs made one exchange, timed by the kernels
    of the block's nccl:coalesced mark, and each lone send or recv an exchange of its own (module
    docstring). A block holds the sendrecv anchors without kernels of their own on the mark's thread
    since that thread's previous other anchor or mark."""
    by_thread: dict[tuple, list[_Anchor]] = defaultdict(list)
    for anchor in anchors + marks:
        by_thread[anchor.pid, anchor.tid].append(anchor)
    merged: list[_Anchor] = []
    for events in by_thread.values():
        block: list[_Anchor] = []
        # stable: of two at one time, the anchor before the mark, each in file order
        events.sort(key=lambda anchor: anchor.start_us)
        for anchor in events:
            if anchor.op == COALESCED:
                if block:
                    merged.append(_exchange(block, anchor.kernels, rank))
                    anchor.used = True
                block = []
            elif anchor.op == SENDRECV and not anchor.kernels:
                block.append(anchor)
            else:
                merged.extend(_exchange([one], [], rank) for one in block)
                block = []
                merged.append(_exchange([anchor], [], rank) if anchor.op == SENDRECV else anchor)
        merged.extend(_exchange([one], [], rank) for one in block)
    return merged


def _exchange(records: list[_Anchor], kernels: list[tuple[float, float]], rank: int | None) -> _Anchor:
    """One exchange of a block's send and recv records: the largest message, every message's peers
    (none where this rank or a peer is not named), the block's kernels."""
    first = records[0]
    transfers: tuple[tuple[int, int], ...] = ()
    if rank is not None and all(record.peer is not None for record in records):
        transfers = tuple((rank, record.peer) if record.is_send else (record.peer, rank) for record in records)
    sizes = [record.in_elements for record in records if record.in_elements is not None]
    return replace(first, in_elements=max(sizes) if sizes else None, out_elements=None,
                   kernels=first.kernels + list(kernels), transfers=transfers)


def _peer(name: str, args: dict[str, Any]) -> int | None:
    """A send's or recv's peer, its record's Dst Rank or Src Rank (a global rank; None where not given)."""
    key = {"send": "Dst Rank", "recv": "Src Rank"}.get(name.lower())
    if key is None:
        return None
    peer = as_int(args.get(key))
    if peer is None and isinstance(args.get(key), str) and args[key].strip().isdigit():
        peer = int(args[key])
    if peer is not None and peer < 0:
        raise Impossible(f"the {key} of {name} is {peer}")
    return peer


def _whole_groups(anchors: list[_Anchor], groups: tuple[ProcessGroupInfo, ...]) -> None:
    """A group whose rank list the profiler cut short, made whole from distributedInfo's pg_config, which
    lists each process group's ranks in full under the name the collective carries."""
    by_name = {group.name: group.ranks for group in groups}
    for anchor in anchors:
        whole = by_name.get(anchor.process_group) if anchor.ranks_cut else None
        if whole is not None and len(whole) == anchor.group_size:
            anchor.group_ranks, anchor.ranks_cut = whole, False
