import ast
from pathlib import Path

import pytest

from nccl_bench.results.schema import PLACEMENT_IN
from nccl_bench.units import op_table
from nccl_bench.units.op_table import OPS, buffer_elems, round_size, smallest_size


def test_split_ops_round_to_whole_chunks_per_rank():
    # 1000 bytes of float32 over 3 ranks: chunks of 83 elements -> 996 bytes actually moved.
    assert round_size(OPS["all_gather"], 1000, 4, 3) == 996
    assert round_size(OPS["all_reduce"], 1001, 4, 3) == 1000
    assert round_size(OPS["reduce_scatter"], 8, 4, 3) == 0


def test_the_smallest_message_holds_one_element_per_rank():
    assert smallest_size(OPS["all_reduce"], 4, 2) == 8
    assert smallest_size(OPS["all_gather"], 2, 3) == 6  # one bfloat16 from each of 3 ranks
    assert smallest_size(OPS["sendrecv"], 8, 4) == 32


@pytest.mark.parametrize(
    "op, send, recv, count",
    [
        ("all_reduce", 24, 24, 24),
        ("all_gather", 8, 24, 8),
        ("reduce_scatter", 24, 8, 8),
        ("all_to_all", 24, 24, 8),
        ("broadcast", 24, 24, 24),
        ("reduce", 24, 24, 24),
        ("gather", 8, 24, 8),
        ("scatter", 24, 8, 8),
        ("sendrecv", 24, 24, 24),
    ],
)
def test_buffers_and_count_follow_nccl_tests(op, send, recv, count):
    collective = OPS[op]
    assert buffer_elems(collective, 96, 4, 3) == (send, recv)
    assert collective.count(24, 3) == count


@pytest.mark.parametrize("op", [name for name in OPS if name != "barrier"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_expected_segments_tile_each_checked_output_exactly(op, n):
    collective = OPS[op]
    elems = 12 * n
    _, recv = buffer_elems(collective, elems * 4, 4, n)
    for rank in range(n):
        segments = collective.expected(rank, n, 0, recv)
        covered = sorted((s.start, s.start + s.length) for s in segments)
        if not covered:
            continue
        assert covered[0][0] == 0 and covered[-1][1] == recv
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))


def test_rootless_ops_have_root_free_results_and_reductions_are_marked():
    assert {name for name, c in OPS.items() if c.rooted} == {"broadcast", "reduce", "gather", "scatter"}
    assert {name for name, c in OPS.items() if c.reduces} == {"all_reduce", "reduce_scatter", "reduce"}
    assert OPS["all_reduce"].placements == (PLACEMENT_IN,)


def test_uneven_segments_follow_the_packed_split_layout():
    shares = ((1.0, 0.5, 0.0), (0.25, 1.0, 1.0), (0.5, 0.5, 0.5))  # row i: what rank i sends each peer
    segments = OPS["all_to_allv"].segments(rank=1, world_size=3, root=0, out_elems=12, shares=shares)
    # slot of 4: rank 1 receives 2 from rank 0 (after its 4 for rank 0), 4 from itself (after 1), 2 from rank 2
    assert [(s.start, s.length, s.source_rank, s.source_index) for s in segments] \
        == [(0, 2, 0, 4), (2, 4, 1, 1), (6, 2, 2, 2)]
    assert OPS["all_to_allv"].segments(1, 3, 0, 12) == OPS["all_to_all"].expected(1, 3, 0, 12)


def test_factors_per_op_follow_nccl_tests_performance_md():
    n = 3
    expected = {
        "all_reduce": 4 / 3, "all_gather": 2 / 3, "reduce_scatter": 2 / 3, "all_to_all": 2 / 3,
        "gather": 2 / 3, "scatter": 2 / 3, "broadcast": 1.0, "reduce": 1.0, "sendrecv": 1.0,
    }
    for name, factor in expected.items():
        assert OPS[name].factor(n) == pytest.approx(factor, rel=1e-15), name
    assert OPS["barrier"].factor is None


def test_only_barrier_lacks_a_factor_and_a_binary():
    assert {name for name, c in OPS.items() if c.factor is None} == {"barrier"}
    assert {name for name, c in OPS.items() if c.binary is None} == {"barrier"}
    assert not op_table.moves_data("barrier") and not op_table.moves_data("hypercube")
    assert op_table.factor_of("barrier") is None and op_table.bus_factor("hypercube", 4) is None
    assert op_table.bus_factor("all_reduce", 4) == pytest.approx(1.5, rel=1e-15)


def test_binary_names_map_to_our_ops_and_back():
    assert op_table.op_of_binary("alltoall") == "all_to_all"
    assert op_table.op_of_binary("sendrecv") == "sendrecv"
    assert op_table.op_of_binary("hypercube") == "hypercube"
    assert op_table.binary_of("all_to_all") == "alltoall_perf"
    assert op_table.binary_of("all_reduce") == "all_reduce_perf"
    assert op_table.binary_of("hypercube") == "hypercube_perf"
    for op in op_table.OP_OF_BINARY.values():
        assert op_table.op_of_binary(op_table.binary_of(op).removesuffix("_perf")) == op


def test_nccl_tests_prints_one_ranks_chunk_as_count_for_the_chunked_ops_but_alltoallv():
    assert {name for name, c in OPS.items() if c.nccltests_count_per_rank} == {
        "all_gather", "reduce_scatter", "gather", "scatter", "all_to_all"}
    assert op_table.count_is_per_rank("all_to_all") and not op_table.count_is_per_rank("all_to_allv")


PACKAGE = Path(op_table.__file__).resolve().parents[1]
# The two tables of a collective: its spec, and its torch call keyed by the same name.
TABLES = {PACKAGE / "units" / "op_table.py", PACKAGE / "ranks" / "collectives.py"}


def _op_name_collections(path: Path) -> list[tuple[int, list[str]]]:
    """(line, op names) of each tuple, list, set or dict-keys literal in the file that holds an op name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        names = [item.value for item in items if isinstance(item, ast.Constant) and item.value in OPS]
        if names:
            found.append((node.lineno, names))
    return found


def test_no_module_but_the_two_tables_lists_op_names():
    # Adding a collective is one spec and one call: a tuple or dict of op names anywhere else would
    # be a third place to edit. One name as a string (a default, a comparison) is a use, not a list.
    listed = {
        f"{path.relative_to(PACKAGE.parent)}:{line}": names
        for path in sorted(PACKAGE.rglob("*.py")) if path not in TABLES
        for line, names in _op_name_collections(path)
    }
    assert listed == {}, "derive these from units/op_table.OPS instead"


def test_the_scan_finds_a_listed_op_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('ROOTED = ("broadcast", "reduce")\nFUNC = {"all_reduce": "AllReduce"}\nDEFAULT = "all_reduce"\n')
    assert _op_name_collections(module) == [(1, ["broadcast", "reduce"]), (2, ["all_reduce"])]
