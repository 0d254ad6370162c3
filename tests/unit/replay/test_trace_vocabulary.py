"""torch's and NCCL's names in a trace, each in ours; nccl-tests' size of a call from its element counts."""

from __future__ import annotations

import pytest

from nccl_bench.replay.trace_vocabulary import dtype_of, nccl_tests_elements, op_of_name
from nccl_bench.units.op_table import OP_NAMES


@pytest.mark.parametrize("name,op", [
    ("allreduce", "all_reduce"), ("allreduce_coalesced", "all_reduce"), ("nccl:all_reduce", "all_reduce"),
    ("gloo:all_reduce", "all_reduce"), ("c10d::allreduce_", "all_reduce"),
    ("allgather", "all_gather"), ("_allgather_base", "all_gather"), ("nccl:_all_gather_base", "all_gather"),
    ("all_gather_into_tensor_coalesced", "all_gather"),
    ("reduce_scatter", "reduce_scatter"), ("_reduce_scatter_base", "reduce_scatter"),
    ("nccl:_reduce_scatter_base", "reduce_scatter"),
    ("broadcast", "broadcast"), ("_broadcast_oop", "broadcast"), ("reduce", "reduce"), ("_reduce_oop", "reduce"),
    ("all_to_all", "all_to_all"), ("nccl:all_to_all", "all_to_all"), ("all_to_allv", "all_to_allv"),
    ("c10d::alltoall_base_", "all_to_all"),
    ("gather", "gather"), ("scatter", "scatter"), ("send", "sendrecv"), ("recv", "sendrecv"),
    ("nccl:recv", "sendrecv"), ("barrier", "barrier"), ("gloo:barrier", "barrier"),
    ("c10d::monitored_barrier_", "barrier"),
    ("wait", None), ("coalesced", None), ("ProfilerStep#3", None),
])
def test_collective_names(name, op):
    assert op_of_name(name) == op
    assert op is None or op in OP_NAMES


def test_all_to_all_with_split_sizes_is_all_to_allv():
    assert op_of_name("all_to_all", uneven_splits=True) == "all_to_allv"
    assert op_of_name("allreduce", uneven_splits=True) == "all_reduce"


@pytest.mark.parametrize("name,ours", [
    ("Float", ("float32", 4)), ("BFloat16", ("bfloat16", 2)), ("Half", ("float16", 2)), ("Long", ("int64", 8)),
    ("Byte", ("uint8", 1)), ("Char", ("int8", 1)), ("Double", ("float64", 8)), ("Int", ("int32", 4)),
    ("float", ("float32", 4)), ("c10::Half", ("float16", 2)), ("c10::BFloat16", ("bfloat16", 2)),
    ("unsigned char", ("uint8", 1)), ("signed char", ("int8", 1)), ("long int", ("int64", 8)),
    ("int", ("int32", 4)), ("Float8_e4m3fn", ("float8_e4m3fn", 1)), ("TensorList", None), ("", None),
])
def test_dtypes(name, ours):
    assert dtype_of(name) == ours


@pytest.mark.parametrize("op,in_elements,out_elements,group,expected", [
    ("all_reduce", 1000, 1000, 8, 1000),
    ("broadcast", 53, 53, 2, 53),
    ("all_gather", 100, 800, 8, 800),  # the gathered output
    ("all_gather", 100, None, 8, 800),  # only the input (one rank's chunk) is named
    ("all_gather", 100, None, None, None),
    ("reduce_scatter", 800, 100, 8, 800),  # the input, n chunks
    ("reduce_scatter", 800, None, 8, 800),
    ("all_to_all", 640, 640, 8, 640),
    ("all_to_allv", 600, 700, 8, 700),
    ("gather", 100, 800, 8, 800),  # the root's
    ("gather", 100, 0, 8, 800),  # a rank that is not the root receives nothing
    ("scatter", 800, 100, 8, 800),
    ("scatter", 0, 100, 8, 800),
    ("sendrecv", 64, 0, 2, 64),
    ("sendrecv", 0, 64, 2, 64),
    ("barrier", 1, 1, 2, 0),
])
def test_nccl_tests_sizes(op, in_elements, out_elements, group, expected):
    assert nccl_tests_elements(op, in_elements, out_elements, group) == expected


def test_the_ops_whose_output_to_input_ratio_is_the_group_size():
    from nccl_bench.replay.trace_vocabulary import chunk_to_whole
    from nccl_bench.units.op_table import OPS

    assert {op for op in OPS if chunk_to_whole(op)} == {"all_gather", "reduce_scatter"}
    assert not chunk_to_whole("no_such_op")
