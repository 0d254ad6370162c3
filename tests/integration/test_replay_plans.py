"""Ranks of one launch given traces that plan different replays stop before any group is made: every
rank exchanges its plan's digest first and, on a mismatch, says in one line which ranks planned from which
traces (exit 2), instead of hanging in a group the others never make. Real gloo ranks, each started
with its own command line as a launcher starts them."""

from __future__ import annotations

import subprocess
import sys

from nccl_bench.errors import EXIT_BAD_INPUT
from tests.helpers.launch import REPO, worker_env
from tests.helpers.ports import free_port
from tests.helpers.traces import collective, write_trace

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
