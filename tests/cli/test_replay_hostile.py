"""Hostile traces: each refused in one line naming the file and the value, exit 2, before any rank starts
(asked to replay on 2 workers, with --out and --json), nothing written; no negative, non-finite or
impossible number reaches a table or a file. A FIFO and a shell's `<(...)` are read once, as streams,
and never hang. A replay is recorded in the history as a replay."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.forked_cli import run_forked
from tests.helpers.launch import worker_env
from tests.helpers.traces import collective, kernel, write_trace

ERROR = "nccl-bench: error: "


def _replay(tmp_path: Path, trace: str, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_forked(["replay", trace, *extra], cwd=tmp_path, env=worker_env({"COLUMNS": "200"}), timeout=timeout)


def _nested(path: Path) -> Path:
    path.write_text('{"traceEvents": [' + "[" * 2000 + "]" * 2000 + "]}")
    return path


@pytest.mark.parametrize("name,make,problem", [
    ("deep.json", _nested, "not a trace: its JSON nests deeper than any trace's events"),
    ("group0.json", lambda p: write_trace(p, [collective(**{"Group size": 0})]),
     "impossible value: the Group size of allreduce is 0"),
    ("group-2.json", lambda p: write_trace(p, [collective(**{"Group size": -2})]),
     "impossible value: the Group size of allreduce is -2"),
    ("world0.json", lambda p: write_trace(p, [collective()], world_size=0),
     "impossible value: distributedInfo's world_size is 0"),
    ("negative.json", lambda p: write_trace(p, [collective(nelems=-1024)]),
     "impossible value: the In msg nelems of allreduce is -1024"),
    ("rank-2.json", lambda p: write_trace(p, [collective(ranks=[0, -2])]),
     "impossible value: the group of all_reduce holds rank -2"),
    ("huge.json", lambda p: write_trace(p, [collective(nelems=10**30)]),
     "impossible value: the In msg nelems of allreduce is 1e+30, more elements than a tensor holds"),
    ("kernel-100.json", lambda p: write_trace(p, [collective(), kernel(dur=-100)], backend="nccl"),
     "impossible value: an NCCL kernel's duration is -100 us"),
    ("kernelnan.json", lambda p: write_trace(p, [collective(), kernel(dur=float("nan"))], backend="nccl"),
     "impossible value: an event's dur is nan"),
])
def test_a_hostile_trace_is_refused_in_one_line_with_nothing_written(tmp_path, name, make, problem):
    trace = make(tmp_path / name)
    done = _replay(tmp_path, name, "--workers", "2", "--out", "run", "--json", "replay.json", "--no-history")
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
    assert done.stderr.splitlines() == [f"{ERROR}{name}: {problem}"]
    assert sorted(os.listdir(tmp_path)) == [trace.name]  # no run folder, no JSON, no results root


def _through_a_pipe(tmp_path: Path, args: str) -> subprocess.CompletedProcess:
    """`nccl-bench replay <(cat t.json) ARGS` as bash runs it."""
    command = f"exec {shlex.quote(sys.executable)} -m nccl_bench replay <(cat t.json) {args}"
    return subprocess.run(["bash", "-c", command], cwd=tmp_path, env=worker_env({"COLUMNS": "200"}),
                          capture_output=True, text=True, timeout=60)


def test_a_pipe_is_refused_for_local_workers_who_would_read_it_again(tmp_path):
    write_trace(tmp_path / "t.json", [collective()])
    done = _through_a_pipe(tmp_path, "--workers 2 --no-history")
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
    [line] = done.stderr.splitlines()
    assert line.startswith(ERROR + "/dev/fd/") and line.endswith(
        ": a pipe or FIFO is read once, and local workers read the traces again: save it to a file first")
    assert sorted(os.listdir(tmp_path)) == ["t.json"]


def test_a_fifo_nobody_writes_to_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "f")
    done = _replay(tmp_path, "f", timeout=30)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"{ERROR}f: nothing to read: no program has written to it (a pipe or FIFO is read as it is written)"])


def test_a_pipe_is_read_once_as_a_stream(tmp_path):
    """`replay <(cat t.json)`: the shell's pipe, read once; its collectives all there, its kernels matched."""
    write_trace(tmp_path / "t.json", [collective(), kernel(dur=7.5)], backend="nccl")
    done = _through_a_pipe(tmp_path, "--json out.json")
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads((tmp_path / "out.json").read_text())["collectives"]
    assert (row["op"], row["bytes"], row["job_time_us"]) == ("all_reduce", 4096, 7.5)


def test_a_replay_is_recorded_in_the_history_as_a_replay(tmp_path):
    write_trace(tmp_path / "t.json", [collective()])
    done = _replay(tmp_path, "t.json", "--workers", "2", "--iters", "2", "--warmup", "0", "--trials", "1",
                   "--history", "h.sqlite", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(tmp_path / "h.sqlite") as store:
        assert store.execute("SELECT kind FROM runs").fetchall() == [("replay",)]
