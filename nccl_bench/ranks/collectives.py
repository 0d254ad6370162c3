"""The torch call of each collective: CALLS has exactly one per spec of units/op_table.OPS, keyed by
the same names, and holds nothing else; everything pure about an op (sizes, buffers, factor,
placements, the check's expected data) is its spec there. Also the buffer views a call is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from nccl_bench.units import alltoallv
from nccl_bench.units.op_table import PLACEMENT_OUT, Collective, uneven_splits

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


def _bind_all_to_allv(buffers: Buffers, args: OpArgs):
    dist = _dist()
    sent, received, _ = uneven_splits(args.rank, args.world_size, args.shares, buffers.send.numel() // args.world_size)
    # Each peer's part is packed after the previous one, as all_to_all_single lays out split sizes.
    send, recv, group = buffers.send[: sum(sent)], buffers.recv[: sum(received)], args.group
    return lambda: dist.all_to_all_single(recv, send, output_split_sizes=received, input_split_sizes=sent,
                                          group=group)


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


def bind_exchange(buffers: Buffers, args: OpArgs, transfers: tuple[tuple[int, int], ...]):
    """A replayed point-to-point exchange: this rank's messages of `transfers` ((from, to) global ranks),
    batched as the job batched them; each receive lands in its own part of the receive buffer."""
    dist = _dist()
    me = args.global_rank(args.rank)
    chunk = buffers.send.numel()
    ops = [dist.P2POp(dist.isend, buffers.send, to, group=args.group) for src, to in transfers if src == me]
    sources = [src for src, to in transfers if to == me]
    ops += [dist.P2POp(dist.irecv, buffers.recv[index * chunk:(index + 1) * chunk], src, group=args.group)
            for index, src in enumerate(sources)]
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


# (buffers, args) -> a zero-argument callable running the op once
Call = Callable[[Buffers, OpArgs], Callable[[], None]]

CALLS: dict[str, Call] = {
    "all_reduce": _bind_all_reduce,
    "all_gather": _bind_all_gather,
    "reduce_scatter": _bind_reduce_scatter,
    "broadcast": _bind_broadcast,
    "reduce": _bind_reduce,
    "gather": _bind_gather,
    "scatter": _bind_scatter,
    "all_to_all": _bind_all_to_all,
    "all_to_allv": _bind_all_to_allv,
    "sendrecv": _bind_sendrecv,
    "barrier": _bind_barrier,
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
