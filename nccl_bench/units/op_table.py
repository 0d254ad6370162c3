"""Every collective, one `Collective` spec each, in the order `nccl-bench ops` lists them: the one
table of what is pure about an op, as nccl-tests keeps all of one op in its `struct testColl`.

A spec says what nccl-tests says of the op (its binary, its bus-bandwidth factor from
doc/PERFORMANCE.md, how `count` relates to `size`), how a size maps to buffers, which placements
torch allows, what it takes from the command line (a reduction operator, a root rank, uneven
shares) and what each rank's output must hold for the correctness check. The one thing it does not
hold is the torch call: ranks/collectives.CALLS has exactly one per name here. Adding a collective
is one spec below and one call there; no other module lists op names (a test checks both).

Sizes follow nccl-tests' doc/PERFORMANCE.md: `size_bytes` is the larger of the send and receive
buffer of one rank (all_gather: the gathered output; reduce_scatter: the input; all_to_all: the
whole send buffer; gather/scatter: n x chunk). `count` is the element count nccl-tests prints
(the per-rank chunk for ops with per-rank chunks). all_to_allv keeps all_to_all's size and count (the
per-peer slot) and fills a share of each slot, as nccl-tests' alltoallv does (units/alltoallv.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from nccl_bench.units import alltoallv
from nccl_bench.units.bandwidth import ALL_REDUCE, GATHER_LIKE, WHOLE_BUFFER, BusFactor

# A point's placement: the output in a buffer of its own, or written over the input (nccl-tests' in-place).
PLACEMENT_OUT = "out_of_place"
PLACEMENT_IN = "in_place"
BOTH = (PLACEMENT_OUT, PLACEMENT_IN)


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


def uneven_splits(rank: int, world_size: int, shares: alltoallv.Shares | None,
                  slot_elems: int) -> tuple[list[int], list[int], list[int]]:
    """(elements sent to each peer, received from each peer, offset of this rank's data in each peer's input);
    shares None: every slot filled."""
    matrix = shares if shares is not None else alltoallv.shares(alltoallv.Distribution("even"), world_size)
    counts = alltoallv.split_counts(matrix, slot_elems)
    n = world_size
    return list(counts[rank]), [counts[k][rank] for k in range(n)], [sum(counts[k][:rank]) for k in range(n)]


def _uneven_from_each_rank(rank: int, n: int, shares: alltoallv.Shares, out_elems: int) -> list[Segment]:
    _, received, offsets = uneven_splits(rank, n, shares, out_elems // n)
    starts = [sum(received[:k]) for k in range(n)]
    return [Segment(starts[k], received[k], k, offsets[k]) for k in range(n)]


def _chunk(elems: int, n: int) -> int:
    return elems // n


@dataclass(frozen=True)
class Collective:
    """One op, everything about it but its torch call."""

    name: str
    summary: str
    size_meaning: str
    binary: str | None  # nccl-tests' binary stem (it builds <binary>_perf); None: nccl-tests has none
    factor: BusFactor | None  # busbw/algbw as a function of the rank count; None: no bandwidth (barrier)
    per_rank_chunks: bool  # the buffer is divided into world_size chunks, so size rounds to n x element size
    placements: tuple[str, ...]
    reduces: bool = False  # combines the ranks' data with a reduction operator
    rooted: bool = False  # one rank is the source or the destination
    # nccl-tests prints one rank's chunk as `count` and the whole buffer as `size` (its *GetCollByteCount:
    # paramcount is count/nranks), so in its logs size = count x type size x n ranks.
    nccltests_count_per_rank: bool = False
    # the name ncclFuncToString gives the collective NCCL runs for it, as its tuning lines print it; None:
    # torch builds the op from point-to-point sends (gather, scatter, all_to_all, sendrecv), so no such line
    nccl_function: str | None = None
    # NVLS (NVLink SHARP) reduces in the switch, lifting nccl-tests' busbw above the links' rate
    nvls_above_links: bool = False
    min_world_size: int = 1
    # torch's names for the op in a profiler trace (record_param_comms' `Collective name`, nccl:*, gloo:*
    # and c10d:: events), lower-cased without underscores, each the start of such a name
    trace_names: tuple[str, ...] = ()
    send_elems: Callable[[int, int], int] = lambda elems, n: elems
    recv_elems: Callable[[int, int], int] = lambda elems, n: elems
    count: Callable[[int, int], int] = lambda elems, n: elems
    # (rank, world_size, root, output elements) -> what this rank's output must hold
    expected: Callable[[int, int, int, int], list[Segment]] = _whole
    # uneven ops: (rank, world_size, shares, output elements) -> what this rank's output must hold
    expected_uneven: Callable[[int, int, alltoallv.Shares, int], list[Segment]] | None = None

    @property
    def uneven(self) -> bool:
        """Sends each peer its own share of the chunk (--alltoallv)."""
        return self.expected_uneven is not None

    @property
    def moves_data(self) -> bool:
        """Sends a message at all, so that a size applies; barrier alone does not, and so has no factor."""
        return self.factor is not None

    @property
    def factor_formula(self) -> str:
        return "-" if self.factor is None else self.factor.formula

    def segments(self, rank: int, world_size: int, root: int, out_elems: int,
                 shares: alltoallv.Shares | None = None) -> list[Segment]:
        """What this rank's output must hold after one run (shares: the uneven ops' filled part of each slot)."""
        if self.expected_uneven is not None and shares is not None:
            return self.expected_uneven(rank, world_size, shares, out_elems)
        return self.expected(rank, world_size, root, out_elems)


_ALL_TO_ALL = Collective(
    name="all_to_all",
    trace_names=("alltoall",),
    summary="rank r sends its chunk k to rank k",
    size_meaning="bytes of the whole send buffer on each rank (n x chunk)",
    binary="alltoall",
    factor=GATHER_LIKE,
    per_rank_chunks=True,
    placements=(PLACEMENT_OUT,),
    nccltests_count_per_rank=True,
    count=_chunk,
    expected=_my_chunk_from_each_rank,
)

OPS: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            name="all_reduce",
            trace_names=("allreduce",),
            summary="every rank ends with the reduction of all ranks' buffers",
            size_meaning="bytes of the buffer on each rank",
            binary="all_reduce",
            factor=ALL_REDUCE,
            per_rank_chunks=False,
            placements=(PLACEMENT_IN,),  # torch's all_reduce has no separate output buffer
            reduces=True,
            nccl_function="AllReduce",
            nvls_above_links=True,
        ),
        Collective(
            name="all_gather",
            trace_names=("allgather",),
            summary="every rank ends with all ranks' chunks, concatenated",
            size_meaning="bytes of the gathered output (n x chunk)",
            binary="all_gather",
            factor=GATHER_LIKE,
            per_rank_chunks=True,
            placements=BOTH,
            nccltests_count_per_rank=True,
            nccl_function="AllGather",
            send_elems=_chunk,
            count=_chunk,
            expected=_chunks_from_each_rank,
        ),
        Collective(
            name="reduce_scatter",
            trace_names=("reducescatter",),
            summary="rank r ends with chunk r of the reduction",
            size_meaning="bytes of the input on each rank (n x chunk)",
            binary="reduce_scatter",
            factor=GATHER_LIKE,
            per_rank_chunks=True,
            placements=BOTH,
            reduces=True,
            nccltests_count_per_rank=True,
            nccl_function="ReduceScatter",
            recv_elems=_chunk,
            count=_chunk,
            expected=_my_chunk_reduced,
        ),
        Collective(
            name="broadcast",
            trace_names=("broadcast",),
            summary="every rank ends with the root's buffer",
            size_meaning="bytes of the buffer",
            binary="broadcast",
            factor=WHOLE_BUFFER,
            per_rank_chunks=False,
            placements=(PLACEMENT_IN,),  # torch's broadcast writes into the one buffer it is given
            rooted=True,
            nccl_function="Broadcast",
            expected=_from_root,
        ),
        Collective(
            name="reduce",
            trace_names=("reduce",),
            summary="the root ends with the reduction of all ranks' buffers",
            size_meaning="bytes of the buffer on each rank",
            binary="reduce",
            factor=WHOLE_BUFFER,
            per_rank_chunks=False,
            placements=(PLACEMENT_IN,),  # torch's reduce reduces into the buffer it is given
            reduces=True,
            rooted=True,
            nccl_function="Reduce",
            expected=lambda rank, n, root, out: _whole(rank, n, root, out) if rank == root else [],
        ),
        Collective(
            name="gather",
            trace_names=("gather",),
            summary="the root ends with all ranks' chunks, concatenated",
            size_meaning="bytes gathered at the root (n x chunk)",
            binary="gather",
            factor=GATHER_LIKE,
            per_rank_chunks=True,
            placements=(PLACEMENT_OUT,),
            rooted=True,
            nccltests_count_per_rank=True,
            send_elems=_chunk,
            count=_chunk,
            expected=lambda rank, n, root, out: _chunks_from_each_rank(rank, n, root, out) if rank == root else [],
        ),
        Collective(
            name="scatter",
            trace_names=("scatter",),
            summary="rank r ends with chunk r of the root's buffer",
            size_meaning="bytes scattered by the root (n x chunk)",
            binary="scatter",
            factor=GATHER_LIKE,
            per_rank_chunks=True,
            placements=(PLACEMENT_OUT,),
            rooted=True,
            nccltests_count_per_rank=True,
            recv_elems=_chunk,
            count=_chunk,
            expected=_my_chunk_of_root,
        ),
        _ALL_TO_ALL,
        replace(
            _ALL_TO_ALL,
            name="all_to_allv",
            summary="rank r sends rank k a share of its chunk k (--alltoallv: even, random, skewed)",
            size_meaning="bytes of the whole send buffer on each rank (n x chunk), whatever part is filled",
            binary="alltoallv",
            trace_names=(),  # all_to_all with split sizes in a trace (replay/trace_vocabulary.py)
            nccltests_count_per_rank=False,  # nccl-tests' alltoallv prints the whole buffer, however much is sent
            expected_uneven=_uneven_from_each_rank,  # `expected` stays all_to_all's: every share 1
        ),
        Collective(
            name="sendrecv",
            trace_names=("send", "recv"),
            summary="ring: rank r sends to r+1 and receives from r-1 (batched isend/irecv)",
            size_meaning="bytes sent (and received) by each rank",
            binary="sendrecv",
            factor=WHOLE_BUFFER,
            per_rank_chunks=False,
            placements=(PLACEMENT_OUT,),
            min_world_size=2,
            expected=_from_previous_rank,
        ),
        Collective(
            name="barrier",
            trace_names=("barrier", "monitoredbarrier"),
            summary="synchronisation only; reports latency, no bandwidth",
            size_meaning="none (latency only)",
            binary=None,  # moves no data, so nccl-tests has no barrier_perf
            factor=None,
            per_rank_chunks=False,
            placements=(PLACEMENT_OUT,),
            send_elems=lambda elems, n: 0,
            recv_elems=lambda elems, n: 0,
            count=lambda elems, n: 0,
            expected=_nothing,
        ),
    )
}
OP_NAMES: tuple[str, ...] = tuple(OPS)
# nccl-tests binary stem -> op name.
OP_OF_BINARY: dict[str, str] = {c.binary: name for name, c in OPS.items() if c.binary is not None}


def moves_data(op: str) -> bool:
    """Whether the op sends a message at all (barrier does not), so that a size applies to it."""
    return op in OPS and OPS[op].moves_data


def factor_of(op: str) -> BusFactor | None:
    """The op's bus-bandwidth factor; None for an op without one (barrier, unknown)."""
    collective = OPS.get(op)
    return None if collective is None else collective.factor


def count_is_per_rank(op: str) -> bool:
    """nccl-tests prints `count` of one rank's chunk for this op (size = count x type size x ranks)."""
    collective = OPS.get(op)
    return collective is not None and collective.nccltests_count_per_rank


def rank_count_matters(op: str) -> bool:
    """busbw depends on the rank count for this op (a factor such as (n-1)/n); not for broadcast, reduce,
    sendrecv (factor 1) or an op whose own busbw/algbw is kept."""
    factor = factor_of(op)
    return factor is not None and factor.scale is not None


def bus_factor(op: str, world_size: int) -> float | None:
    """busbw/algbw for `op` at `world_size` ranks; None for an op without one (barrier, unknown)."""
    factor = factor_of(op)
    return None if factor is None else factor(world_size)


def op_of_binary(stem: str) -> str:
    """Our name of an nccl-tests binary stem (alltoall -> all_to_all); unknown stems are kept."""
    return OP_OF_BINARY.get(stem, stem)


def binary_of(op: str) -> str:
    """The nccl-tests binary measuring `op` (all_to_all -> alltoall_perf); an unknown op keeps its name."""
    collective = OPS.get(op)
    stem = op if collective is None or collective.binary is None else collective.binary
    return f"{stem}_perf"


def round_size(collective: Collective, size_bytes: int, element_bytes: int, world_size: int) -> int:
    """Round down to whole elements (and whole chunks for ops with per-rank chunks); 0 means too small to run."""
    unit = element_bytes * (world_size if collective.per_rank_chunks else 1)
    return (size_bytes // unit) * unit


def smallest_size(collective: Collective, element_bytes: int, world_size: int) -> int:
    """The op's smallest message, one element per rank, rounded as any size is: the size of its per-call
    floor (ranks/runner.CallFloors)."""
    return round_size(collective, element_bytes * world_size, element_bytes, world_size)


def buffer_elems(collective: Collective, size_bytes: int, element_bytes: int, world_size: int) -> tuple[int, int]:
    elems = size_bytes // element_bytes
    return collective.send_elems(elems, world_size), collective.recv_elems(elems, world_size)
