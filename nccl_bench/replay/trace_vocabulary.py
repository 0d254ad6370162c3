"""What torch and NCCL call things in a profiler trace, in nccl_bench's words (pure: names in, names out).

- Collective names: torch's `record_param_comms` `Collective name` (allreduce, _allgather_base,
  all_to_allv, send, ...), its `nccl:*` and `gloo:*` annotations and `c10d::*` ops, each our op name
  (units/op_table.OP_NAMES) or None for a record that is no collective (wait, coalesced).
- Element types: torch's ScalarType names (`dtype`: Float, BFloat16, Long) and the C++ type names of
  `Input type` (float, c10::Half, long int), each our dtype name and its bytes.
- Kernel names: which GPU kernels are NCCL's. A kernel's name says nothing of NCCL's algorithm or
  protocol: since NCCL 2.19 every collective launches through a `<coll>_..._RING_LL` or `_TREE_LL`
  kernel whatever was chosen (src/device/generate.py, best_kernel), and before it LL128 and SIMPLE ran
  in the LL kernel; only NCCL's tuning log says what ran.
- Sizes: an op's byte count as nccl-tests means it (units/op_table.py), from a call's element counts.
"""

from __future__ import annotations

from nccl_bench.units.op_table import OPS

# A name with its source's prefix and underscores dropped, lower-cased, starts with one of an op's trace
# names (units/op_table.py); the longest first, so the more specific wins (reducescatter before reduce).
_OP_OF_PREFIX = tuple(sorted(((prefix, collective.name) for collective in OPS.values()
                              for prefix in collective.trace_names), key=lambda pair: -len(pair[0])))
_SOURCE_PREFIXES = ("nccl:", "gloo:", "c10d::")


def op_of_name(name: str, uneven_splits: bool = False) -> str | None:
    """Our op for a collective's name in a trace, or None for a record that is no collective.

    all_to_all with per-peer split sizes is all_to_allv (torch names it so in record_param_comms from
    2.1 on; older names and annotations say all_to_all whatever the splits).
    """
    compact = name
    for prefix in _SOURCE_PREFIXES:
        compact = compact.removeprefix(prefix)
    compact = compact.replace("_", "").lower()
    op = next((op for prefix, op in _OP_OF_PREFIX if compact.startswith(prefix)), None)
    if op == "all_to_all" and (uneven_splits or compact.startswith("alltoallv")):
        return "all_to_allv"
    return op


# Our dtype name and its bytes, by torch's ScalarType name (record_param_comms' `dtype`) and by the C++
# type name of the profiler's `Input type`, both lower-cased with any `c10::` dropped.
_DTYPES: dict[str, tuple[str, int]] = {
    "float": ("float32", 4),
    "half": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "double": ("float64", 8),
    "char": ("int8", 1),
    "signed char": ("int8", 1),
    "byte": ("uint8", 1),
    "unsigned char": ("uint8", 1),
    "short": ("int16", 2),
    "int": ("int32", 4),
    "long": ("int64", 8),
    "long int": ("int64", 8),
    "bool": ("bool", 1),
    "float8_e4m3fn": ("float8_e4m3fn", 1),
    "float8_e5m2": ("float8_e5m2", 1),
    "complexfloat": ("complex64", 8),
    "complex<float>": ("complex64", 8),
    "complexdouble": ("complex128", 16),
    "complex<double>": ("complex128", 16),
}


def dtype_of(type_name: str) -> tuple[str, int] | None:
    """(our dtype name, bytes per element) for a trace's type name; None for one not known here."""
    return _DTYPES.get(type_name.strip().lower().removeprefix("c10::"))


def is_nccl_kernel(name: str) -> bool:
    """A GPU kernel NCCL (or RCCL) launched: ncclKernel_*, ncclDevKernel_*."""
    return name.startswith("nccl")


# A buffer of this many elements over this many ranks tells an op's whole buffer from its chunk.
_PROBE_ELEMS, _PROBE_RANKS = 12, 3


def chunk_to_whole(op: str) -> bool:
    """Every rank's call has one buffer n times the other (all_gather, reduce_scatter), so the ratio of
    its output to its input is the group's size."""
    collective = OPS.get(op)
    if collective is None or collective.rooted or not collective.moves_data:
        return False
    sizes = (collective.send_elems(_PROBE_ELEMS, _PROBE_RANKS), collective.recv_elems(_PROBE_ELEMS, _PROBE_RANKS))
    return sorted(sizes) == [_PROBE_ELEMS // _PROBE_RANKS, _PROBE_ELEMS]


def nccl_tests_elements(op: str, in_elements: int, out_elements: int | None, group_size: int | None) -> int | None:
    """The element count of the op's nccl-tests size (units/op_table.py: the whole buffer), from one
    call's input and output element counts (the output None where the trace names only the input).

    all_gather's size is its gathered output; a trace naming only the input (one rank's chunk) is n
    times that. gather's input is one rank's chunk, so its size is n times the input; scatter's output is
    one chunk, so n times the output. For the others the larger of input and output is the whole buffer:
    reduce_scatter's input, all_reduce's and broadcast's one buffer, all_to_all's send buffer, send's or
    recv's message. barrier moves nothing. None where a needed group size is not known.
    """
    collective = OPS.get(op)
    if collective is None:
        return None
    if not collective.moves_data:
        return 0
    # which of the op's two buffers is the whole nccl-tests size and which one rank's chunk, from its spec
    send_whole = collective.send_elems(_PROBE_ELEMS, _PROBE_RANKS) == _PROBE_ELEMS
    recv_whole = collective.recv_elems(_PROBE_ELEMS, _PROBE_RANKS) == _PROBE_ELEMS
    if send_whole != recv_whole:
        whole, chunk = (out_elements, in_elements) if recv_whole else (in_elements, out_elements)
        if whole and not collective.rooted:  # a rooted op's whole buffer is only at its root
            return whole
        if chunk is not None:
            return None if group_size is None else chunk * group_size
    return max(in_elements, out_elements or 0)
