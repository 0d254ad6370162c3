"""Every collective by name, in the order `nccl-bench ops` lists them, and what each takes from the
command line: a reduction operator, a root rank, uneven per-peer shares.

The one list of op names, below the rank side: the options check --op against it, and the sweep's
config checks which options an op uses, without importing the registry that binds torch calls.
ranks/collectives.REGISTRY has one entry per name here, in this order; units/bandwidth.OPS holds
each op's bus-bandwidth factor and nccl-tests binary.
"""

from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.units import bandwidth


@dataclass(frozen=True)
class OpTraits:
    reduces: bool = False  # combines the ranks' data with a reduction operator
    rooted: bool = False  # one rank is the source or the destination
    uneven: bool = False  # sends each peer its own share of the chunk


OPS: dict[str, OpTraits] = {
    "all_reduce": OpTraits(reduces=True),
    "all_gather": OpTraits(),
    "reduce_scatter": OpTraits(reduces=True),
    "broadcast": OpTraits(rooted=True),
    "reduce": OpTraits(reduces=True, rooted=True),
    "gather": OpTraits(rooted=True),
    "scatter": OpTraits(rooted=True),
    "all_to_all": OpTraits(),
    "all_to_allv": OpTraits(uneven=True),
    "sendrecv": OpTraits(),
    "barrier": OpTraits(),
}
OP_NAMES: tuple[str, ...] = tuple(OPS)


def moves_data(op: str) -> bool:
    """Whether the op sends a message at all (barrier does not), so that a size applies to it."""
    return op in bandwidth.OPS
