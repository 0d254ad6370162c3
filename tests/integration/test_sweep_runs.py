"""Real multi-process sweeps: torchrun (and Slurm/Open MPI layouts) with gloo on CPU tensors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.units.op_table import OPS
from tests.helpers.launch import run_cli, run_torchrun, worker_env
from tests.helpers.ports import free_port

pytestmark = pytest.mark.integration


def _ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nSTDOUT\n{result.stdout}\nSTDERR\n{result.stderr[-3000:]}"


def test_two_ranks_all_reduce_writes_csv_meta_and_table(tmp_path):
    out = tmp_path / "run"
    steering = {"NCCL_DEBUG": "WARN", "TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_FR_BUFFER_SIZE": "0"}
    result = run_torchrun(2, ["sweep", "--no-plot",
                              "--op", "all_reduce", "--sizes", "1K,3000,1M", "--iters", "5", "-w", "1",
                              "--out", str(out)], env={**steering, "NCCL_BENCH_UNRELATED_TOKEN": "x", "MY_TOKEN": "y"})
    _ok(result)
    rows = read_rows(out)
    assert [r.size_bytes for r in rows] == [1024, 3000, 1048576]
    assert [r.count for r in rows] == [256, 750, 262144]
    for row in rows:
        assert row.wrong == 0 and row.status == "ok" and row.iters == 5 and row.world_size == 2
        assert row.busbw_gbps / row.algbw_gbps == pytest.approx(1.0)  # 2(n-1)/n at n=2
        assert row.algbw_gbps == pytest.approx(row.size_bytes / (row.time_us * 1e-6) / 1e9)
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["status"], meta["world_size"], meta["nodes"], meta["backend"], meta["rows"]) == (
        "complete", 2, 1, "gloo", 3)
    # every NCCL_/TORCH_NCCL_/TORCH_FR_ variable, and nothing else of the environment
    assert all(k.startswith(("NCCL_", "TORCH_NCCL_", "TORCH_FR_")) for k in meta["env"]), meta["env"]
    assert steering.items() <= meta["env"].items() and "MY_TOKEN" not in meta["env"]
    assert "busbw" in result.stdout and "# Avg bus bandwidth (all_reduce, in)" in result.stdout
    assert not (out / "busbw.png").exists()  # --no-plot reached rank 0 through torchrun
    _recorded_once(out)


def _recorded_once(run_dir) -> None:
    """Rank 0 recorded the run in the session's history (tests/conftest.py), and no other rank did."""
    import os
    import sqlite3

    with sqlite3.connect(os.environ["NCCL_BENCH_HISTORY"]) as connection:
        found = connection.execute("SELECT COUNT(*) FROM runs WHERE source = ?", (str(run_dir),)).fetchone()[0]
    connection.close()
    assert found == 1


def test_three_ranks_every_op_correct_with_nccl_tests_factors(tmp_path):
    out = tmp_path / "run"
    result = run_torchrun(3, ["sweep", "--no-plot", "--op", "all", "--sizes", "1K,100K", "--iters", "3", "-w", "1",
                              "--out", str(out)], timeout=300)
    _ok(result)
    rows = read_rows(out)
    by_op = {}
    for row in rows:
        by_op.setdefault(row.op, []).append(row)
    assert set(by_op) == set(OPS)
    for row in rows:
        assert row.status == "ok", (row.op, row.flags)
        collective = OPS[row.op]
        if collective.factor is None:
            assert row.busbw_gbps is None and row.time_us > 0
            continue
        assert row.wrong == 0, row
        assert row.busbw_gbps / row.algbw_gbps == pytest.approx(collective.factor(3), rel=1e-9), row.op
        unit = 4 * 3 if collective.per_rank_chunks else 4
        assert row.size_bytes % unit == 0 and row.size_bytes in (
            1020 if collective.per_rank_chunks else 1024, 102396 if collective.per_rank_chunks else 102400
        )
    placements = {(r.op, r.placement) for r in rows}
    assert ("all_gather", "in_place") in placements and ("all_gather", "out_of_place") in placements
    assert {r.root for r in by_op["broadcast"]} == {0} and {r.root for r in by_op["all_reduce"]} == {-1}


def test_types_and_reductions_check_out(tmp_path):
    out = tmp_path / "run"
    result = run_torchrun(2, ["sweep", "--no-plot",
                              "--op", "all_reduce,reduce_scatter,reduce", "-d", "bfloat16", "-o", "max",
                              "--sizes", "2K", "--iters", "2", "-w", "0", "--root", "1", "--out", str(out)])
    _ok(result)
    rows = read_rows(out)
    assert {(r.op, r.dtype, r.redop, r.wrong) for r in rows} == {
        ("all_reduce", "bfloat16", "max", 0), ("reduce_scatter", "bfloat16", "max", 0),
        ("reduce", "bfloat16", "max", 0)}
    assert [r.root for r in rows if r.op == "reduce"] == [1]


def test_corrupted_result_is_caught_and_fails_the_run(tmp_path):
    out = tmp_path / "run"
    result = run_torchrun(2, ["sweep", "--no-plot", "--op", "all_gather", "--sizes", "1K", "--iters", "2", "-w", "0",
                              "--no-inplace", "--out", str(out)], env={"NCCL_BENCH_FAULT": "corrupt"})
    assert result.returncode != 0
    rows = read_rows(out)
    assert [(r.wrong, r.status) for r in rows] == [(1, "wrong")]
    assert "wrong element" in result.stderr


def test_corrupted_result_under_local_workers_is_said_once_by_rank_0_and_exits_1(tmp_path):
    # rank 0 alone exits with the verdict (cli/on_ranks.carries_verdict); the command reads it back
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot",
                      "--workers", "2", "--op", "all_gather", "--sizes", "1K", "--iters", "2", "-w", "0",
                      "--no-inplace", "--out", str(out)], env={"NCCL_BENCH_FAULT": "corrupt"})
    assert result.returncode == 1, result.stderr[-3000:]
    assert [(r.wrong, r.status) for r in read_rows(out)] == [(1, "wrong")]
    said = [line for line in result.stderr.splitlines() if line.startswith("nccl-bench: ") and "launcher" not in line]
    assert said == ["nccl-bench: error: 1 wrong element(s) in the data check"], said


def test_without_launcher_workers_start_through_torch_launcher(tmp_path):
    result = run_cli(["sweep", "--no-plot", "--workers", "2", "--op", "broadcast", "--sizes", "1K", "--iters", "2",
                      "--results-root", str(tmp_path)])
    _ok(result)
    (run_dir,) = list(tmp_path.iterdir())
    assert run_dir.name.endswith("_broadcast")
    rows = read_rows(run_dir)
    assert [(r.op, r.world_size, r.wrong) for r in rows] == [("broadcast", 2, 0)]


def test_open_mpi_layout_two_processes(tmp_path):
    out = tmp_path / "run"
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = worker_env({
            "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
        })
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "nccl_bench", "sweep", "--no-plot",
             "--op", "sendrecv", "--sizes", "1K", "--iters", "2",
             "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["launcher"], meta["world_size"]) == ("mpirun", 2)
    assert [(r.op, r.wrong) for r in read_rows(out)] == [("sendrecv", 0)]


def test_slurm_layout_single_task(tmp_path):
    out = tmp_path / "run"
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    result = run_cli(
        ["sweep", "--no-plot",
         "--op", "all_reduce,sendrecv", "--sizes", "1K", "--iters", "2", "--out", str(out)], env=env
    )
    _ok(result)
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["launcher"], meta["world_size"]) == ("slurm", 1)
    rows = {(r.op, r.placement): r for r in read_rows(out)}
    reduced = rows["all_reduce", "in_place"]  # in place at one rank moves nothing: flagged, no bandwidth
    assert reduced.busbw_gbps is None and "one_rank_in_place" in reduced.flags
    sendrecv = [r for (op, _), r in rows.items() if op == "sendrecv"]
    assert sendrecv and all(r.status == "unsupported" and "at least 2 ranks" in r.flags for r in sendrecv)


def test_one_rank_in_place_rows_are_flagged_without_bandwidth(tmp_path):
    """One gloo rank: every in-place collective has nothing to move; out of place still copies."""
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot",
                      "--workers", "1", "--op", "all_reduce,all_gather", "--sizes", "64K", "--trials", "2",
                      "-w", "1", "--no-history", "--out", str(out)], env={"COLUMNS": "250"}, cwd=tmp_path)
    _ok(result)
    rows = {(r.op, r.placement): r for r in read_rows(out)}
    for key in (("all_reduce", "in_place"), ("all_gather", "in_place")):
        assert "one_rank_in_place" in rows[key].flags.split(";"), rows[key]
        assert (rows[key].algbw_gbps, rows[key].busbw_gbps) == (None, None) and rows[key].time_us > 0
    copied = rows["all_gather", "out_of_place"]
    assert "one_rank_in_place" not in copied.flags and copied.algbw_gbps > 0
    assert ("# warning: 2 in-place row(s) of one rank measure nothing (the collective has nothing to move: NCCL "
            "queues no GPU work for it, or for avg of floating-point data only a multiply by 1 of the rank's own "
            "buffer): their time is call overhead, so no bandwidth is given") in result.stdout


def test_gloos_smallest_sizes_are_flagged_call_bound_and_its_large_ones_not(tmp_path):
    """A real 2-rank gloo sweep: the 8 B all_reduce (one element per rank) is the per-call floor itself, so
    its row is call_bound; 16 MiB takes tens of times a call's cost on any host and is a bandwidth. The end
    says what the flag means and where NCCL's own latency is seen."""
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot",
                      "--workers", "2", "--op", "all_reduce", "--sizes", "8,4K,16M", "--iters", "20", "-w",
                      "1", "--no-history", "--out", str(out)])
    assert result.returncode == 0, result.stderr[-2000:]
    flags = {row.size_bytes: row.flags.split(";") for row in read_rows(out / "results.csv")}
    assert "call_bound" in flags[8] and "call_bound" not in flags[16 << 20]
    assert "measure what a call costs, not bandwidth" in result.stdout and "--cuda-graph" in result.stdout
