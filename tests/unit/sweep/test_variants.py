"""The fastest --nccl-env variant per point, and the summary lines that say it."""

from __future__ import annotations

from functools import partial

from nccl_bench.render.repeats import fastest_variant_lines
from nccl_bench.results.schema import STATUS_UNSUPPORTED
from nccl_bench.sweep.variants import fastest_variants
from tests.helpers.rows import row

_row = partial(row, dtype="float32", iters=2, time_us=10.0, spread=0.0, p50_us=None, p99_us=None)


def test_the_fastest_variant_beats_the_runner_up_by_its_margin():
    rows = [_row(variant="NCCL_ALGO=Ring", size_bytes=1024, busbw=2.0),
            _row(variant="NCCL_ALGO=Tree", size_bytes=1024, busbw=3.0),
            _row(variant="NCCL_ALGO=NVLS", size_bytes=1024, busbw=1.0),
            _row(variant="NCCL_ALGO=Ring", size_bytes=4096, busbw=8.0),
            _row(variant="NCCL_ALGO=Tree", size_bytes=4096, busbw=4.0)]
    found = fastest_variants(rows)
    assert [(f.size_bytes, f.best.variant, f.runner_up.variant) for f in found] == [
        (1024, "NCCL_ALGO=Tree", "NCCL_ALGO=Ring"), (4096, "NCCL_ALGO=Ring", "NCCL_ALGO=Tree")]
    assert [f.margin for f in found] == [0.5, 1.0]
    assert fastest_variant_lines(rows)[1:] == [
        "#   all_reduce in 1K: NCCL_ALGO=Tree, 50% faster than NCCL_ALGO=Ring (3 GB/s vs 2)",
        "#   all_reduce in 4K: NCCL_ALGO=Ring, 100% faster than NCCL_ALGO=Tree (8 GB/s vs 4)",
    ]


def test_without_a_bandwidth_the_time_decides_and_unsupported_rows_take_no_part():
    rows = [_row(variant="NCCL_ALGO=Ring", size_bytes=0, busbw=None, time_us=20.0),
            _row(variant="NCCL_ALGO=Tree", size_bytes=0, busbw=None, time_us=10.0),
            _row(variant="NCCL_ALGO=NVLS", size_bytes=0, busbw=None, time_us=None, status=STATUS_UNSUPPORTED)]
    [found] = fastest_variants(rows)
    assert (found.best.variant, found.on_busbw, found.margin) == ("NCCL_ALGO=Tree", False, 1.0)
    assert fastest_variant_lines(rows)[1].endswith("100% faster than NCCL_ALGO=Ring (10 us vs 20)")


def test_one_variant_or_none_gives_no_answer():
    assert fastest_variants([_row(variant="NCCL_ALGO=Ring", size_bytes=1024, busbw=2.0),
                             _row(variant="", size_bytes=1024, busbw=3.0)]) == []
    assert fastest_variant_lines([_row(variant="", size_bytes=1024, busbw=3.0)]) == []


def test_at_one_rank_busbw_of_zero_ranks_nothing_and_the_time_decides():
    # busbw is 0 by definition for an (n-1)/n op at one rank: Tree at 30 us beats Ring at 900 us
    rows = [_row(variant="NCCL_ALGO=Ring", size_bytes=4096, busbw=0.0, time_us=900.0, world_size=1),
            _row(variant="NCCL_ALGO=Tree", size_bytes=4096, busbw=0.0, time_us=30.0, world_size=1)]
    [found] = fastest_variants(rows)
    assert (found.best.variant, found.on_busbw, found.margin) == ("NCCL_ALGO=Tree", False, 29.0)
