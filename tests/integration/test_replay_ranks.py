"""A replay's ranks together, real gloo ranks: ranks given traces that plan different replays stop
before any group is made (every rank exchanges its plan's digest first and, on a mismatch, says in one
line which ranks planned from which traces, exit 2, instead of hanging in a group the others never
make); a rank outside a point's group waits through a point longer than --timeout, and through the timing of
its per-call floor, without failing."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from nccl_bench.errors import EXIT_BAD_INPUT
from tests.helpers.launch import REPO, run_cli, worker_env
from tests.helpers.ports import free_port
from tests.helpers.traces import SENDRECV_KERNEL, coalesced, collective, kernel, point_to_point, write_trace

WORLD = 3


def _start(rank: int, port: int, trace, tmp_path) -> subprocess.Popen:
    env = worker_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMPI_COMM_WORLD_RANK": str(rank),
                      "OMPI_COMM_WORLD_SIZE": str(WORLD), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
                      "OMPI_COMM_WORLD_LOCAL_SIZE": str(WORLD)})
    argv = [sys.executable, "-m", "nccl_bench", "replay", str(trace), "--iters", "2", "--warmup", "0",
            "--trials", "1", "--timeout", "20", "--no-history", "--out", str(tmp_path / "run")]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                            start_new_session=True)


def test_ranks_given_traces_that_plan_differently_stop_in_one_line(tmp_path):
    traces = []
    for rank in range(WORLD):
        # ranks 0 and 1: one all_reduce on ranks 0,1; rank 2: a larger one on ranks 1,2
        events = [collective(nelems=1024, ranks=[0, 1])] if rank < 2 else [collective(nelems=4096, ranks=[1, 2])]
        traces.append(write_trace(tmp_path / f"r{rank}.json", events, rank=rank, world_size=WORLD))
    port = free_port()
    procs = [_start(rank, port, traces[rank], tmp_path) for rank in range(WORLD)]
    ended = [proc.communicate(timeout=60) for proc in procs]
    expected = ("the ranks were given traces that plan different replays (ranks 0,1 planned from r0.json, "
                "r1.json; rank 2 planned from r2.json): give every rank the same trace files")
    for proc, (_, stderr) in zip(procs, ended, strict=True):
        assert proc.returncode == EXIT_BAD_INPUT, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith(expected), stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.xdist_group("timing")
def test_a_rank_outside_a_long_points_group_waits_without_a_false_deadline(tmp_path):
    """A pair's all_reduce on 3 ranks: rank 2 sits it out while 10 samples of 0.75 s run, 7.5 s against a
    --timeout of 6 s; each of the pair's steps renews its deadline, as it renews the pair's. A loaded
    host stretches a sample (its length is planned from the fastest calibration block): each step is
    planned at an eighth of the deadline (a 1.5 s sample ran past 6 s once beside the whole suite, 2.5 s
    and 1.5 s against 3 s before that). The pair times its per-call floor (8 B) first, its steps beating too."""
    trace = write_trace(tmp_path / "pair.json", [collective(nelems=1024, ranks=[0, 1])], world_size=2)
    done = run_cli(["replay", str(trace), "--workers", "3", "--timeout", "6", "--min-sample-ms", "750",
                    "--trials", "10", "--warmup", "0", "--no-history", "--out", str(tmp_path / "run")], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "run" / "results.csv", newline="") as handle:
        [row] = list(csv.DictReader(handle))
    assert (row["group"], row["status"], row["trials"]) == ("ranks 0,1", "ok", "10")
    [floor] = json.loads((tmp_path / "run" / "meta.json").read_text())["call_floors"]
    assert (floor["group"], floor["size_bytes"]) == ("ranks 0,1", 8) and floor["median_call_us"] > 0


def test_point_to_point_is_replayed_between_the_records_peers(tmp_path):
    """Rank 0 of a 3-rank job: a batch_isend_irecv with rank 2 (a send and a recv, one kernel in
    endCoalescing), then a lone send to rank 1. Each is one exchange, replayed on the ranks it names, not a
    ring over the process group [0, 1, 2]; rank 1 only receives, rank 2 both sends and receives."""
    events = [point_to_point("send", 2, ranks=[0, 1, 2], ts=0, external_id=1),
              point_to_point("recv", 2, ranks=[0, 1, 2], ts=5, external_id=2),
              coalesced(3, ts=10), kernel(external_id=3, ts=12, dur=40.0, name=SENDRECV_KERNEL),
              point_to_point("send", 1, ranks=[0, 1, 2], ts=100, external_id=4),
              kernel(external_id=4, ts=102, dur=20.0, name=SENDRECV_KERNEL)]
    trace = write_trace(tmp_path / "p2p.json", events, rank=0, world_size=WORLD, backend="nccl")
    done = run_cli(["replay", str(trace), "--workers", str(WORLD), "--iters", "5", "--warmup", "1", "--trials", "1",
                    "--timeout", "20", "--no-history", "--out", str(tmp_path / "run")], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "run" / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["op"], row["group"], row["size_bytes"], row["status"]) for row in rows] == [
        ("sendrecv", "ranks 0,2", "4096", "ok"), ("sendrecv", "ranks 0,1", "4096", "ok")]
