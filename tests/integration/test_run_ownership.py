"""Runs that share a folder, parents that die, litter left behind: real `--workers` sweeps.

Of runs started at once on one --out exactly one writes it (the others are refused in one line); a
default folder is never shared; a rank whose parent is SIGKILLed ends within seconds, keeping what it
wrote; torch's agent leaves nothing in TMPDIR; a torchrun restart goes on where its first attempt stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_bench.ranks.planted import FAULT_ENV
from tests.helpers.forked_cli import run_forked
from tests.helpers.launch import REPO, worker_env
from tests.helpers.processes import alive, child_pids

pytestmark = pytest.mark.xdist_group("signals")

SWEEP = ["sweep", "--no-plot", "--workers", "2", "--op", "all_reduce", "--sizes", "1K", "--iters", "2", "--warmup", "0"]
ORPHAN_LIMIT_S = 15  # the ranks poll their parent every 0.5 s; the rest is their ending on a loaded host


def _start(args: list[str], logs: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nccl_bench", *args], stdout=open(logs / f"{name}.out", "w"),
                            stderr=open(logs / f"{name}.err", "w"), start_new_session=True, env=worker_env(env))


def _finish(procs: dict[str, subprocess.Popen]) -> dict[str, int]:
    try:
        return {name: proc.wait(timeout=180) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def test_runs_started_at_once_never_share_a_folder_and_leave_no_litter(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    shared, root = tmp_path / "shared", tmp_path / "results"
    env = {"TMPDIR": str(temp)}
    procs = {"a": _start([*SWEEP, "--out", str(shared)], tmp_path, "a", env),
             "b": _start([*SWEEP, "--out", str(shared)], tmp_path, "b", env),
             "default": _start([*SWEEP, "--results-root", str(root)], tmp_path, "default", env)}
    codes = _finish(procs)
    assert codes["default"] == 0
    assert sorted([codes["a"], codes["b"]]) == [0, 2]
    refused = "a" if codes["a"] == 2 else "b"
    line = (tmp_path / f"{refused}.err").read_text()
    # Taken while the other run measures; or, on a host loaded enough that the other run wrote first, not empty.
    assert line.startswith(f"nccl-bench: error: --out: {shared} is taken by another run (pid ") or line == (
        f"nccl-bench: error: --out: {shared} already exists and is not empty; a run never overwrites results\n")
    assert line.count("\n") == 1
    [own] = list(root.iterdir())
    for folder in (shared, own):
        lines = (folder / "results.csv").read_text().splitlines()
        assert len(lines) == 2 and "busbw_gbps" in lines[0].split(",")  # one header, one row: nothing mixed in
    metas = [json.loads((folder / "meta.json").read_text()) for folder in (shared, own)]
    assert [m["status"] for m in metas] == ["complete", "complete"] and metas[0]["pid"] != metas[1]["pid"]
    assert list(temp.iterdir()) == []  # torch's agent left no torchelastic_* folder behind


def test_ranks_whose_parent_is_sigkilled_end_keeping_their_rows(tmp_path):
    out, temp = tmp_path / "run", tmp_path / "tmp"
    temp.mkdir()
    ranks: list[int] = []
    proc = _start([*SWEEP, "--cycles", "0", "--out", str(out)], tmp_path, "cli", {"TMPDIR": str(temp)})  # for ever
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            csv = out / "results.csv"
            if csv.exists() and len(csv.read_text().splitlines()) >= 3:
                break
            time.sleep(0.1)
        ranks = child_pids(proc.pid)
        assert len(ranks) == 2, (proc.poll(), (tmp_path / "cli.err").read_text())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + ORPHAN_LIMIT_S
        while time.monotonic() < deadline and any(alive(pid) for pid in ranks):
            time.sleep(0.1)
        assert not any(alive(pid) for pid in ranks), "a rank outlived its parent"
    finally:
        for pid in [*ranks, proc.pid]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["stopped_because"].startswith("the process that started this rank (pid ")
    assert meta["rows"] >= 2 and len((out / "results.csv").read_text().splitlines()) == meta["rows"] + 1
    assert list(temp.iterdir()) == []  # the agent's temporary folder went with the ranks it orphaned



def test_a_torchrun_restart_goes_on_in_its_folder_with_one_row_per_point(tmp_path):
    """Rank 1 is killed at its second point in the first attempt only; torchrun --max-restarts 1 starts
    the job again: the restarted attempt takes its own --out, keeps the rows before, measures the rest."""
    out = tmp_path / "run"
    argv = ["--standalone", "--nproc_per_node", "2", "--max-restarts", "1", "-m", "nccl_bench",
            "sweep", "--no-plot",
            "--op", "all_reduce", "--sizes", "1K,2K,4K", "--iters", "2", "--warmup", "0", "--out", str(out)]
    done = run_forked(argv, module="torch.distributed.run", cwd=REPO, env=worker_env({FAULT_ENV: "crash:1:1"}),
                      timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (out / "results.csv").read_text().splitlines()
    sizes = [line.split(",")[lines[0].split(",").index("size_bytes")] for line in lines[1:]]
    assert sizes == ["1024", "2048", "4096"] and "busbw_gbps" in lines[0]  # one header, no row twice or lost
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["status"], meta["attempt"], meta["rows"]) == ("complete", 1, 3)
    assert "already exists" not in done.stderr
