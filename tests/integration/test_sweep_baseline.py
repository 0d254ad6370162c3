"""sweep --baseline checks what it can before measuring, and --allow-mismatch lets it run."""

from __future__ import annotations

import pytest

from nccl_bench.results.csv_reader import read_rows
from tests.helpers.rows import MiB, row, write_run

pytestmark = pytest.mark.integration


def test_allow_mismatch_measures_and_compares_across_world_sizes(cli, tmp_path):
    # all_reduce in_place 1 MiB on 2 gloo ranks, 10 s per op: any real run is faster, so the verdict is not at stake
    base = write_run(tmp_path / "base", [row(dtype="float32", time_us=1e7)])
    out = tmp_path / "run"
    result = cli(["sweep", "--no-plot",
                  "--workers", "3", "--sizes", "1M", "--iters", "2", "--warmup", "0", "--out", str(out),
                  "--baseline", str(base), "--allow-mismatch"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    [measured] = read_rows(out)
    assert (measured.op, measured.size_bytes, measured.world_size) == ("all_reduce", MiB, 3)
    assert f"note: world size differs: --baseline {base} has 2, run {out} has 3" in result.stdout


def test_options_that_change_nothing_and_oversubscribed_cores_are_said_once(cli, tmp_path):
    import os

    cores = len(os.sched_getaffinity(0))
    workers = cores + 1
    result = cli(["sweep", "--no-plot",
                  "--workers", str(workers), "--op", "all_gather", "--reduce-op", "max", "--sizes", "1K",
                  "--iters", "2", "--warmup", "0", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    notes = [line for line in result.stderr.splitlines() if line.startswith("nccl-bench: note: ")]
    assert notes == [
        "nccl-bench: note: --reduce-op max is ignored: none of all_gather reduces",
        f"nccl-bench: note: {workers} workers share {cores} CPU core(s): "
        "ranks wait for a core, so times include that wait",
    ]
