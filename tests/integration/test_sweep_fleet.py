"""A real 2-rank gloo sweep for the fleet's tools: --prom holds the CSV's numbers in base units and parses
with Prometheus' own parser; --min-busbw exits 0 at or above the floor and 1 below it, rows written either way."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nccl_bench.results.csv_reader import read_rows
from tests.helpers.launch import run_cli, run_torchrun

pytestmark = pytest.mark.integration

SWEEP = ["sweep", "--no-plot", "--op", "all_reduce,broadcast", "--sizes", "1K,64K", "--iters", "3", "-w", "1"]


def _samples(text: str) -> dict[str, list]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def test_prom_holds_the_csv_values_and_a_floor_below_them_passes(tmp_path):
    out, prom = tmp_path / "run", tmp_path / "metrics" / "sweep.prom"
    prom.parent.mkdir()
    result = run_torchrun(2, [*SWEEP, "--out", str(out), "--prom", str(prom), "--min-busbw", "1e-9"])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_rows(out)
    families = _samples(prom.read_text())
    busbw = {(s.labels["op"], s.labels["placement"], int(s.labels["size_bytes"])): s
             for s in families["nccl_bench_busbw_bytes_per_second"]}
    times = {(s.labels["op"], s.labels["placement"], int(s.labels["size_bytes"])): s.value
             for s in families["nccl_bench_time_seconds"]}
    assert sorted(busbw) == sorted((r.op, r.placement, r.size_bytes) for r in rows) and len(rows) == 4
    for row in rows:
        sample = busbw[(row.op, row.placement, row.size_bytes)]
        assert sample.value == row.busbw_gbps * 1e9
        assert times[(row.op, row.placement, row.size_bytes)] == row.time_us * 1e-6
        assert sample.labels == {"op": row.op, "placement": row.placement, "size_bytes": str(row.size_bytes),
                                 "dtype": "float32", "world_size": "2", "nodes": "1", "backend": "gloo"}
    meta = json.loads((out / "meta.json").read_text())
    (info,) = families["nccl_bench_run_info"]
    assert info.value == 1 and info.labels["command"] == "sweep" and info.labels["status"] == "complete"
    assert info.labels["torch_version"] == meta["versions"]["torch"]
    (stamp,) = families["nccl_bench_run_timestamp_seconds"]
    assert stamp.value > 1.7e9
    assert [p.name for p in prom.parent.iterdir()] == ["sweep.prom"]  # the temporary file was renamed away
    assert "nccl-bench: --min-busbw 1e-09 GB/s reached at each op's largest measured size" in result.stderr
    assert "expected" not in meta and "# expected:" not in result.stdout  # no public figure is for a CPU


def test_below_the_floor_exits_1_naming_the_rows_and_keeps_them(tmp_path):
    out = tmp_path / "run"
    result = run_cli([*SWEEP, "--workers", "2", "--out", str(out), "--min-busbw", "1e6"])
    assert result.returncode == 1, result.stderr[-3000:]
    rows = read_rows(out)
    assert len(rows) == 4 and json.loads((out / "meta.json").read_text())["status"] == "complete"
    largest = [r for r in rows if r.size_bytes == 65536]
    (line,) = [line for line in result.stderr.splitlines() if "below --min-busbw" in line]
    assert line.startswith("nccl-bench: error: below --min-busbw 1e+06 GB/s at the op's largest measured size: ")
    for row in largest:
        assert f"{row.op} 64K {row.placement}: {row.busbw_gbps:.2f} GB/s" in line
    assert "1K" not in line
