"""The fastest --nccl-env variant per point, and the summary lines that say it."""

from __future__ import annotations

from nccl_bench.render.repeats import fastest_variant_lines
from nccl_bench.results.schema import PLACEMENT_IN, STATUS_UNSUPPORTED, ResultRow
from nccl_bench.sweep.variants import fastest_variants


def _row(variant: str, size: int, busbw: float | None, time_us: float = 10.0, status: str = "ok") -> ResultRow:
    return ResultRow(op="all_reduce", placement=PLACEMENT_IN, size_bytes=size, count=size // 4, dtype="float32",
                     redop="sum", root=-1, world_size=2, nodes=1, backend="gloo", iters=2, trials=1,
                     time_us=time_us, time_min_us=time_us, time_max_us=time_us, p50_us=None, p99_us=None,
                     algbw_gbps=busbw, busbw_gbps=busbw, busbw_factor=1.0, wrong=0, slowest_rank=0, agg="max",
                     status=status, variant=variant)


def test_the_fastest_variant_beats_the_runner_up_by_its_margin():
    rows = [_row("NCCL_ALGO=Ring", 1024, 2.0), _row("NCCL_ALGO=Tree", 1024, 3.0), _row("NCCL_ALGO=NVLS", 1024, 1.0),
            _row("NCCL_ALGO=Ring", 4096, 8.0), _row("NCCL_ALGO=Tree", 4096, 4.0)]
    found = fastest_variants(rows)
    assert [(f.size_bytes, f.best.variant, f.runner_up.variant) for f in found] == [
        (1024, "NCCL_ALGO=Tree", "NCCL_ALGO=Ring"), (4096, "NCCL_ALGO=Ring", "NCCL_ALGO=Tree")]
    assert [f.margin for f in found] == [0.5, 1.0]
    assert fastest_variant_lines(rows)[1:] == [
        "#   all_reduce in 1K: NCCL_ALGO=Tree, 50% faster than NCCL_ALGO=Ring (3 GB/s vs 2)",
        "#   all_reduce in 4K: NCCL_ALGO=Ring, 100% faster than NCCL_ALGO=Tree (8 GB/s vs 4)",
    ]


def test_without_a_bandwidth_the_time_decides_and_unsupported_rows_take_no_part():
    rows = [_row("NCCL_ALGO=Ring", 0, None, time_us=20.0), _row("NCCL_ALGO=Tree", 0, None, time_us=10.0),
            _row("NCCL_ALGO=NVLS", 0, None, time_us=None, status=STATUS_UNSUPPORTED)]
    [found] = fastest_variants(rows)
    assert (found.best.variant, found.on_busbw, found.margin) == ("NCCL_ALGO=Tree", False, 1.0)
    assert fastest_variant_lines(rows)[1].endswith("100% faster than NCCL_ALGO=Ring (10 us vs 20)")


def test_one_variant_or_none_gives_no_answer():
    assert fastest_variants([_row("NCCL_ALGO=Ring", 1024, 2.0), _row("", 1024, 3.0)]) == []
    assert fastest_variant_lines([_row("", 1024, 3.0)]) == []
