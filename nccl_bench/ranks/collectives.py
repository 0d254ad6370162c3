"""One registry entry per collective: its nccl-tests size meaning, buffers, launch and expected data.

Sizes follow nccl-tests' doc/PERFORMANCE.md: `size_bytes` is the larger of the send and receive
buffer of one rank (all_gather: the gathered output; reduce_scatter: the input; all_to_all: the
whole send buffer; gather/scatter: n x chunk). `count` is the element count nccl-tests prints
(the per-rank chunk for ops with per-rank chunks). all_to_allv keeps all_to_all's size and count (the per-peer
slot) and fills a share of each slot, as nccl-tests' alltoallv does (units/alltoallv.py).
Adding a collective means adding one entry to REGISTRY, its name and traits to units/op_table.OPS
(REGISTRY keeps that table's order), and its bus-bandwidth factor and nccl-tests binary to
units/bandwidth.OPS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT
from nccl_bench.units import alltoallv, bandwidth, op_table

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Buffers:
    """Views into the sweep's preallocated storage for one point (no allocation per point)."""

    send: "torch.Tensor"
    recv: "torch.Tensor"  # may alias send (in-place placements)


@dataclass(frozen=True)
class OpArgs:
    rank: int
    world_size: int
    root: int
    reduce_op: object  # torch.distributed.ReduceOp member, or None
    shares: alltoallv.Shares | None = None  # uneven ops: the part of each per-peer slot filled; None: all
    group: object = None  # the process group the op runs in; None: the whole world
    members: tuple[int, ...] = ()  # the group's global ranks (rank and root index them); (): the world

    def global_rank(self, rank: int) -> int:
        """torch names roots and peers by their rank in the world, whatever the group."""
        return self.members[rank] if self.members else rank


@dataclass(frozen=True)
class Segment:
    """A stretch of one rank's output and where its data comes from, for the correctness check.

    out[start + j] must equal element (source_index + j) of `source_rank`'s input, or of the
    reduction over all ranks' inputs when source_rank is None.
    """

    start: int
    length: int
    source_rank: int | None
    source_index: int


def _whole(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    return [Segment(0, out_elems, None, 0)]


def _from_root(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    return [Segment(0, out_elems, root, 0)]


def _chunks_from_each_rank(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    chunk = out_elems // n
    return [Segment(k * chunk, chunk, k, 0) for k in range(n)]


def _my_chunk_reduced(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    return [Segment(0, out_elems, None, rank * out_elems)]


def _my_chunk_of_root(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    return [Segment(0, out_elems, root, rank * out_elems)]


def _my_chunk_from_each_rank(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    chunk = out_elems // n
    return [Segment(k * chunk, chunk, k, rank * chunk) for k in range(n)]


def _from_previous_rank(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    return [Segment(0, out_elems, (rank - 1) % n, 0)]


def _nothing(rank: int, n: int, root: int, out_elems: int) -> list[Segment]:
    return []


@dataclass(frozen=True)
class Collective:
    name: str
    summary: str
    size_meaning: str
    per_rank_chunks: bool  # the buffer is divided into world_size chunks, so size rounds to n x element size
    placements: tuple[str, ...]
    min_world_size: int = 1
    send_elems: Callable[[int, int], int] = lambda elems, n: elems
    recv_elems: Callable[[int, int], int] = lambda elems, n: elems
    count: Callable[[int, int], int] = lambda elems, n: elems
    # (buffers, args) -> zero-argument callable running the op once
    bind: Callable[[Buffers, OpArgs], Callable[[], None]] | None = None
    # (rank, world_size, root, output elements) -> what this rank's output must hold
    expected: Callable[[int, int, int, int], list[Segment]] = _whole
    # uneven ops: (args, output elements) -> what this rank's output must hold under args.shares
    expected_uneven: Callable[[OpArgs, int], list[Segment]] | None = None

    @property
    def has_reduction(self) -> bool:
        """Takes a reduction operator, as units/op_table says (the options check --reduce-op there)."""
        return op_table.OPS[self.name].reduces

    @property
    def has_root(self) -> bool:
        """Has a root rank, as units/op_table says (the options check --root there)."""
        return op_table.OPS[self.name].rooted

    @property
    def factor(self) -> Callable[[int], float] | None:
        """busbw/algbw as a function of the world size, from units.bandwidth; None: barrier."""
        return bandwidth.factor_of(self.name)

    def segments(self, args: OpArgs, out_elems: int) -> list[Segment]:
        """What this rank's output must hold after one run with `args`."""
        if self.expected_uneven is not None and args.shares is not None:
            return self.expected_uneven(args, out_elems)
        return self.expected(args.rank, args.world_size, args.root, out_elems)

    @property
    def factor_formula(self) -> str:
        factor = bandwidth.factor_of(self.name)
        return "-" if factor is None else factor.formula


def round_size(collective: Collective, size_bytes: int, element_bytes: int, world_size: int) -> int:
    """Round down to whole elements (and whole chunks for ops with per-rank chunks); 0 means too small to run."""
    unit = element_bytes * (world_size if collective.per_rank_chunks else 1)
    return (size_bytes // unit) * unit


def buffer_elems(collective: Collective, size_bytes: int, element_bytes: int, world_size: int) -> tuple[int, int]:
    elems = size_bytes // element_bytes
    return collective.send_elems(elems, world_size), collective.recv_elems(elems, world_size)


def _chunk(elems: int, n: int) -> int:
    return elems // n


def _dist():
    import torch.distributed as dist

    return dist


def _bind_all_reduce(buffers: Buffers, args: OpArgs):
    dist = _dist()
    tensor, op, group = buffers.recv, args.reduce_op, args.group
    return lambda: dist.all_reduce(tensor, op=op, group=group)


def _bind_all_gather(buffers: Buffers, args: OpArgs):
    dist = _dist()
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    send, recv, group = buffers.send, buffers.recv, args.group
    return lambda: gather(recv, send, group=group)


def _bind_reduce_scatter(buffers: Buffers, args: OpArgs):
    dist = _dist()
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    send, recv, op, group = buffers.send, buffers.recv, args.reduce_op, args.group
    return lambda: scatter(recv, send, op=op, group=group)


def _bind_all_to_all(buffers: Buffers, args: OpArgs):
    dist = _dist()
    send, recv, group = buffers.send, buffers.recv, args.group
    return lambda: dist.all_to_all_single(recv, send, group=group)


def _uneven_splits(args: OpArgs, slot_elems: int) -> tuple[list[int], list[int], list[int]]:
    """(elements sent to each peer, received from each peer, offset of this rank's data in each peer's input)."""
    n, rank = args.world_size, args.rank
    matrix = args.shares if args.shares is not None else alltoallv.shares(alltoallv.Distribution("even"), n)
    counts = alltoallv.split_counts(matrix, slot_elems)
    return list(counts[rank]), [counts[k][rank] for k in range(n)], [sum(counts[k][:rank]) for k in range(n)]


def _bind_all_to_allv(buffers: Buffers, args: OpArgs):
    dist = _dist()
    sent, received, _ = _uneven_splits(args, buffers.send.numel() // args.world_size)
    # Each peer's part is packed after the previous one, as all_to_all_single lays out split sizes.
    send, recv, group = buffers.send[: sum(sent)], buffers.recv[: sum(received)], args.group
    return lambda: dist.all_to_all_single(recv, send, output_split_sizes=received, input_split_sizes=sent,
                                          group=group)


def _uneven_from_each_rank(args: OpArgs, out_elems: int) -> list[Segment]:
    _, received, offsets = _uneven_splits(args, out_elems // args.world_size)
    starts = [sum(received[:k]) for k in range(args.world_size)]
    return [Segment(starts[k], received[k], k, offsets[k]) for k in range(args.world_size)]


def _bind_broadcast(buffers: Buffers, args: OpArgs):
    dist = _dist()
    tensor, root, group = buffers.recv, args.global_rank(args.root), args.group
    return lambda: dist.broadcast(tensor, src=root, group=group)


def _bind_reduce(buffers: Buffers, args: OpArgs):
    dist = _dist()
    tensor, root, op, group = buffers.recv, args.global_rank(args.root), args.reduce_op, args.group
    return lambda: dist.reduce(tensor, dst=root, op=op, group=group)


def _bind_gather(buffers: Buffers, args: OpArgs):
    dist = _dist()
    send, root, group = buffers.send, args.global_rank(args.root), args.group
    gather_list = list(buffers.recv.chunk(args.world_size)) if args.rank == args.root else None
    return lambda: dist.gather(send, gather_list, dst=root, group=group)


def _bind_scatter(buffers: Buffers, args: OpArgs):
    dist = _dist()
    recv, root, group = buffers.recv, args.global_rank(args.root), args.group
    scatter_list = list(buffers.send.chunk(args.world_size)) if args.rank == args.root else None
    return lambda: dist.scatter(recv, scatter_list, src=root, group=group)


def _bind_sendrecv(buffers: Buffers, args: OpArgs):
    dist = _dist()
    n, rank = args.world_size, args.rank
    ops = [
        dist.P2POp(dist.isend, buffers.send, args.global_rank((rank + 1) % n), group=args.group),
        dist.P2POp(dist.irecv, buffers.recv, args.global_rank((rank - 1) % n), group=args.group),
    ]

    capturing = _capture_check(buffers.send)

    def run():
        for work in dist.batch_isend_irecv(ops):
            finish_work(work, capturing())

    return run


def _capture_check(tensor) -> Callable[[], bool]:
    """Whether a CUDA graph is being captured on the current stream, asked at each call (the same op
    runs once before its capture and then inside it); never on CPU, where torch has no such check."""
    if not tensor.is_cuda:
        return lambda: False
    import torch

    return torch.cuda.is_current_stream_capturing


def finish_work(work, capturing: bool) -> None:
    """Make the current stream wait for `work`; the CPU thread also waits, except inside a capture.

    WorkNCCL::wait (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp) joins the streams and then, with
    TORCH_NCCL_BLOCKING_WAIT=1, polls isCompleted(): a query of an event recorded in the capturing
    stream, which invalidates the capture. Inside a capture only the stream join is made:
    Work.block_current_stream (recent torch), else Work.synchronize (the same join in WorkNCCL).
    """
    if not capturing:
        work.wait()
    elif callable(getattr(work, "block_current_stream", None)):
        work.block_current_stream()
    else:
        work.synchronize()


def _bind_barrier(buffers: Buffers, args: OpArgs):
    barrier, group = _dist().barrier, args.group
    return lambda: barrier(group=group)


BOTH = (PLACEMENT_OUT, PLACEMENT_IN)

_ALL_TO_ALL = Collective(
    name="all_to_all",
    summary="rank r sends its chunk k to rank k",
    size_meaning="bytes of the whole send buffer on each rank (n x chunk)",
    per_rank_chunks=True,
    placements=(PLACEMENT_OUT,),
    count=_chunk,
    bind=_bind_all_to_all,
    expected=_my_chunk_from_each_rank,
)

REGISTRY: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            name="all_reduce",
            summary="every rank ends with the reduction of all ranks' buffers",
            size_meaning="bytes of the buffer on each rank",
            per_rank_chunks=False,
            placements=(PLACEMENT_IN,),  # torch's all_reduce has no separate output buffer
            bind=_bind_all_reduce,
        ),
        Collective(
            name="all_gather",
            summary="every rank ends with all ranks' chunks, concatenated",
            size_meaning="bytes of the gathered output (n x chunk)",
            per_rank_chunks=True,
            placements=BOTH,
            send_elems=_chunk,
            count=_chunk,
            bind=_bind_all_gather,
            expected=_chunks_from_each_rank,
        ),
        Collective(
            name="reduce_scatter",
            summary="rank r ends with chunk r of the reduction",
            size_meaning="bytes of the input on each rank (n x chunk)",
            per_rank_chunks=True,
            placements=BOTH,
            recv_elems=_chunk,
            count=_chunk,
            bind=_bind_reduce_scatter,
            expected=_my_chunk_reduced,
        ),
        Collective(
            name="broadcast",
            summary="every rank ends with the root's buffer",
            size_meaning="bytes of the buffer",
            per_rank_chunks=False,
            placements=(PLACEMENT_IN,),  # torch's broadcast writes into the one buffer it is given
            bind=_bind_broadcast,
            expected=_from_root,
        ),
        Collective(
            name="reduce",
            summary="the root ends with the reduction of all ranks' buffers",
            size_meaning="bytes of the buffer on each rank",
            per_rank_chunks=False,
            placements=(PLACEMENT_IN,),  # torch's reduce reduces into the buffer it is given
            bind=_bind_reduce,
            expected=lambda rank, n, root, out: _whole(rank, n, root, out) if rank == root else [],
        ),
        Collective(
            name="gather",
            summary="the root ends with all ranks' chunks, concatenated",
            size_meaning="bytes gathered at the root (n x chunk)",
            per_rank_chunks=True,
            placements=(PLACEMENT_OUT,),
            send_elems=_chunk,
            count=_chunk,
            bind=_bind_gather,
            expected=lambda rank, n, root, out: _chunks_from_each_rank(rank, n, root, out) if rank == root else [],
        ),
        Collective(
            name="scatter",
            summary="rank r ends with chunk r of the root's buffer",
            size_meaning="bytes scattered by the root (n x chunk)",
            per_rank_chunks=True,
            placements=(PLACEMENT_OUT,),
            recv_elems=_chunk,
            count=_chunk,
            bind=_bind_scatter,
            expected=_my_chunk_of_root,
        ),
        _ALL_TO_ALL,
        replace(
            _ALL_TO_ALL,
            name="all_to_allv",
            summary="rank r sends rank k a share of its chunk k (--alltoallv: even, random, skewed)",
            size_meaning="bytes of the whole send buffer on each rank (n x chunk), whatever part is filled",
            bind=_bind_all_to_allv,
            expected_uneven=_uneven_from_each_rank,  # `expected` stays all_to_all's: every share 1
        ),
        Collective(
            name="sendrecv",
            summary="ring: rank r sends to r+1 and receives from r-1 (batched isend/irecv)",
            size_meaning="bytes sent (and received) by each rank",
            per_rank_chunks=False,
            placements=(PLACEMENT_OUT,),
            min_world_size=2,
            bind=_bind_sendrecv,
            expected=_from_previous_rank,
        ),
        Collective(
            name="barrier",
            summary="synchronisation only; reports latency, no bandwidth",
            size_meaning="none (latency only)",
            per_rank_chunks=False,
            placements=(PLACEMENT_OUT,),
            send_elems=lambda elems, n: 0,
            recv_elems=lambda elems, n: 0,
            count=lambda elems, n: 0,
            bind=_bind_barrier,
            expected=_nothing,
        ),
    )
}


def store_elems(placement: str, send_elems: int, recv_elems: int) -> tuple[int, int]:
    """Elements a point takes from the sweep's (send store, receive store).

    In place, the smaller buffer is this rank's chunk of the larger one (all_gather's input sits
    in its output, reduce_scatter's output in its input) and equal ones are the same view, so
    the point lives in one store: the receive store, unless the input is the larger buffer.
    """
    if placement == PLACEMENT_OUT:
        return send_elems, recv_elems
    if send_elems > recv_elems:
        return send_elems, 0
    return 0, recv_elems


def make_buffers(
    collective: Collective, placement: str, send_store, recv_store, send_elems: int, recv_elems: int, rank: int,
    world_size: int,
) -> Buffers:
    """Views for one point; in-place placements alias the output as nccl-tests does (see store_elems)."""
    if placement == PLACEMENT_OUT:
        return Buffers(send=send_store[:send_elems], recv=recv_store[:recv_elems])
    if send_elems > recv_elems:  # reduce_scatter: the output is this rank's chunk of the input
        send = send_store[:send_elems]
        return Buffers(send=send, recv=send[rank * recv_elems : (rank + 1) * recv_elems])
    recv = recv_store[:recv_elems]
    if send_elems < recv_elems:  # all_gather: the input is this rank's chunk of the output
        return Buffers(send=recv[rank * send_elems : (rank + 1) * send_elems], recv=recv)
    return Buffers(send=recv, recv=recv)
