import pytest

from nccl_bench.ranks.collectives import REGISTRY, buffer_elems, round_size
from nccl_bench.results.schema import PLACEMENT_IN


def test_split_ops_round_to_whole_chunks_per_rank():
    # 1000 bytes of float32 over 3 ranks: chunks of 83 elements -> 996 bytes actually moved.
    assert round_size(REGISTRY["all_gather"], 1000, 4, 3) == 996
    assert round_size(REGISTRY["all_reduce"], 1001, 4, 3) == 1000
    assert round_size(REGISTRY["reduce_scatter"], 8, 4, 3) == 0


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
    collective = REGISTRY[op]
    assert buffer_elems(collective, 96, 4, 3) == (send, recv)
    assert collective.count(24, 3) == count


@pytest.mark.parametrize("op", [name for name in REGISTRY if name != "barrier"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_expected_segments_tile_each_checked_output_exactly(op, n):
    collective = REGISTRY[op]
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
    assert {name for name, c in REGISTRY.items() if c.has_root} == {"broadcast", "reduce", "gather", "scatter"}
    assert {name for name, c in REGISTRY.items() if c.has_reduction} == {"all_reduce", "reduce_scatter", "reduce"}
    assert REGISTRY["all_reduce"].placements == (PLACEMENT_IN,)


def test_uneven_segments_follow_the_packed_split_layout():
    from nccl_bench.ranks.collectives import OpArgs

    shares = ((1.0, 0.5, 0.0), (0.25, 1.0, 1.0), (0.5, 0.5, 0.5))  # row i: what rank i sends each peer
    args = OpArgs(rank=1, world_size=3, root=0, reduce_op=None, shares=shares)
    # slot of 4: rank 1 receives 2 from rank 0 (after its 4 for rank 0), 4 from itself (after 1), 2 from rank 2
    assert [(s.start, s.length, s.source_rank, s.source_index) for s in REGISTRY["all_to_allv"].segments(args, 12)] \
        == [(0, 2, 0, 4), (2, 4, 1, 1), (6, 2, 2, 2)]
    even = OpArgs(rank=1, world_size=3, root=0, reduce_op=None)
    assert REGISTRY["all_to_allv"].segments(even, 12) == REGISTRY["all_to_all"].expected(1, 3, 0, 12)
