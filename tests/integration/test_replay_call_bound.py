"""A replay's rows at the per-call floor, real gloo ranks: as a sweep's rows, a replayed collective whose
median call sits within 1.2x of the same op's smallest message on the same ranks (timed once per run through
the same path) is flagged call_bound, the floor is listed in meta.json, and the table shows the flag with
the sweep's note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_bench.results.csv_reader import read_rows
from tests.helpers.launch import run_cli
from tests.helpers.traces import collective, write_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def test_a_replayed_collective_at_the_per_call_floor_is_call_bound_and_a_large_one_is_not(tmp_path):
    """The 8 B all_reduce of 2 ranks (one float per rank) is the floor itself, its own median call; 16 MiB
    takes tens of times a call's cost on any host (as in the sweep's own test) and is a bandwidth."""
    events = [collective(nelems=2, ranks=[0, 1], ts=0.0, external_id=1),
              collective(nelems=4 << 20, ranks=[0, 1], ts=100.0, external_id=2)]
    trace = write_trace(tmp_path / "job.json", events, world_size=2)
    out = tmp_path / "run"
    done = run_cli(["replay", str(trace), "--workers", "2", "--iters", "20", "--warmup", "1", "--trials", "1",
                    "--no-history", "--out", str(out), "--json", str(tmp_path / "replay.json")],
                   env={"COLUMNS": "250"}, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row.size_bytes: row for row in read_rows(out / "results.csv")}
    assert "call_bound" in rows[8].flags.split(";") and "call_bound" not in rows[16 << 20].flags.split(";")
    [floor] = json.loads((out / "meta.json").read_text())["call_floors"]  # one op, one group, one dtype
    assert (floor["op"], floor["dtype"], floor["group"], floor["size_bytes"]) == ("all_reduce", "float32", "", 8)
    assert floor["median_call_us"] == pytest.approx(rows[8].p50_us, rel=1e-6)
    replayed = {entry["bytes"]: entry for entry in json.loads((tmp_path / "replay.json").read_text())["collectives"]}
    assert "call_bound" in replayed[8]["replay_flags"] and "call_bound" not in replayed[16 << 20]["replay_flags"]
    assert "1 row(s) are call_bound" in done.stdout and "replay with --cuda-graph N" in done.stdout
    # the "alone here" time said to be the launch path's, in the table, the JSON and meta.json
    assert "# alone here: each call through torch's launch path" in done.stdout
    assert json.loads((tmp_path / "replay.json").read_text())["alone_here"] == {"timing": "launch_path",
                                                                               "cuda_graph": 0}
    assert json.loads((out / "meta.json").read_text())["config"]["alone_here"] == "launch_path"
    [small] = [line for line in done.stdout.splitlines() if line.startswith("all_reduce ") and " 8 B " in line]
    assert "call_bound" in small


def test_a_one_rank_replay_of_an_in_place_collective_is_flagged_and_given_no_bandwidth(tmp_path):
    """At one rank an in-place all_reduce or broadcast has nothing to move (the sweep's one_rank_in_place):
    its row is flagged with no bandwidth, and the profile says why; an out-of-place all_gather keeps
    nccl-tests' busbw of 0 (factor (n-1)/n)."""
    trace = TRACES / "torch211_nccl2289_1gpu_rank0.json.gz"
    out = tmp_path / "run"
    done = run_cli(["replay", str(trace), "--workers", "1", "--iters", "5", "--warmup", "1", "--trials", "1",
                    "--no-history", "--out", str(out)], env={"COLUMNS": "250"}, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_rows(out / "results.csv")
    in_place = [row for row in rows if row.op in ("all_reduce", "broadcast")]
    assert in_place and all("one_rank_in_place" in row.flags.split(";") for row in in_place)
    assert all(row.algbw_gbps is None and row.busbw_gbps is None for row in in_place)
    [gathered] = [row for row in rows if row.op == "all_gather"]
    assert "one_rank_in_place" not in gathered.flags and gathered.busbw_gbps == 0.0
    assert f"note: {len(in_place)} in-place row(s) of one rank measure nothing" in done.stdout
