"""--nccl-env on gloo: each variant in fresh local ranks, all into one run folder, and the end names
the fastest variant per point (on gloo NCCL's variables change nothing; they are recorded, and
--nccl-trace leaves the algo and proto columns empty)."""

from __future__ import annotations

import pytest

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import run_cli

pytestmark = pytest.mark.integration


def test_every_variant_measures_every_size_into_one_folder_and_the_fastest_is_named(tmp_path):
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot", "--workers", "2", "--sizes", "1K,64K", "--iters", "2", "--warmup", "0",
                      "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_ALGO=Tree", "--nccl-trace",
                      "--out", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_rows(out)
    assert sorted((r.variant, r.size_bytes) for r in rows) == [
        ("NCCL_ALGO=Ring", 1024), ("NCCL_ALGO=Ring", 65536), ("NCCL_ALGO=Tree", 1024), ("NCCL_ALGO=Tree", 65536)]
    assert all(r.algo == r.proto == "" for r in rows)  # --nccl-trace on gloo: NCCL chose nothing
    meta = read_meta(out)
    assert meta["status"] == "complete" and meta["rows"] == 4
    assert [(v["variant"], v["env"]["NCCL_ALGO"], v["status"]) for v in meta["variants"]] == [
        ("NCCL_ALGO=Ring", "Ring", "complete"), ("NCCL_ALGO=Tree", "Tree", "complete")]
    assert all(set(v["timings"]) == {"init_s", "first_op_s"} for v in meta["variants"])
    lines = result.stdout.splitlines()
    assert "# note: --nccl-env variant 2 of 2: NCCL_ALGO=Tree (fresh ranks for each)" in lines
    at = lines.index("# fastest --nccl-env variant per point (busbw; time per op without one):")
    for line, size in zip(lines[at + 1:], (1024, 65536), strict=False):
        measured = sorted((r for r in rows if r.size_bytes == size), key=lambda r: r.busbw_gbps)
        assert line.startswith(f"#   all_reduce in {size // 1024}K: {measured[-1].variant}, "), line
        assert f"faster than {measured[0].variant} (" in line


def test_nccl_env_takes_every_value_nccl_accepts_as_one_variant_carrying_the_exact_value(tmp_path):
    settings = {"NCCL_ALGO": "allreduce:ring;allgather:^tree", "NCCL_SOCKET_IFNAME": "=lo",
                "NCCL_TOPO_FILE": "/tmp/topo.xml", "NCCL_IB_HCA": "^mlx5_0:1,mlx5_1"}
    out = tmp_path / "run"
    given = [arg for name, value in settings.items() for arg in ("--nccl-env", f"{name}={value}")]
    result = run_cli(["sweep", "--no-plot", "--workers", "2", "--sizes", "1K", "--iters", "2", "--warmup", "0", *given,
                      "--out", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    label = " ".join(f"{name}={value}" for name, value in settings.items())
    assert [r.variant for r in read_rows(out)] == [label]
    meta = read_meta(out)
    [variant] = meta["variants"]
    assert variant["variant"] == label and {name: variant["env"][name] for name in settings} == settings
    assert meta["config"]["nccl_env"] == [f"{name}={value}" for name, value in settings.items()]
