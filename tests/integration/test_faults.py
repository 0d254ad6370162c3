"""Faults in real torchrun/gloo runs: a rank killed or frozen mid-sweep, SIGTERM through torchrun.

Each test starts torchrun in its own session, finds the rank processes among its children (by the
RANK in their environment), waits until results.csv holds a few rows, injects the fault, and then
checks what the user is left with: one error line, a non-zero exit, no process left behind, and a
CSV that parses and holds every row finished before the fault.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_bench.ranks.faults import FAILURE_ROLL_CALL_S
from nccl_bench.ranks.native_output import backend_error_text
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.processes import alive, child_pids, rank_of
from tests.helpers.rows import rows_on_disk

pytestmark = pytest.mark.xdist_group("signals")

# Enough small points that the sweep is still running when the fault lands, each one quick.
SWEEP = ["--op", "all_reduce", "--min-bytes", "1K", "--max-bytes", "64M", "--iters", "20", "--warmup", "1"]
# Process start, teardown and torchrun's 0.1 s monitor on 2 shared, busy cores.
SLACK_S = 15.0


def _start(out: Path, nproc: int, timeout_s: float | None, logs: Path) -> subprocess.Popen:
    """torchrun's sweep; timeout_s None: the default --timeout."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
        "-m", "nccl_bench", "sweep", "--no-plot", *SWEEP, *(() if timeout_s is None else ("--timeout", str(timeout_s))),
        "--out", str(out),
    ]
    return subprocess.Popen(
        cmd, stdout=open(logs / "stdout.txt", "w"), stderr=open(logs / "stderr.txt", "w"),
        start_new_session=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


def _ranks_after_rows(proc: subprocess.Popen, out: Path, nproc: int, rows: int, limit_s: float = 120) -> dict[int, int]:
    """Rank -> pid, once results.csv holds `rows` rows."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        if rows_on_disk(out) >= rows:
            ranks = {rank_of(child): child for child in child_pids(proc.pid)}
            ranks.pop(None, None)
            if len(ranks) == nproc:
                return ranks
        time.sleep(0.05)
    pytest.fail(f"the sweep never reached {rows} rows (exit {proc.poll()})")


def _wait_gone(pids, limit_s: float) -> float:
    start = time.monotonic()
    while any(alive(pid) for pid in pids):
        if time.monotonic() - start > limit_s:
            pytest.fail(f"processes still running after {limit_s:.0f} s: {[p for p in pids if alive(p)]}")
        time.sleep(0.05)
    return time.monotonic() - start


def _error_lines(logs: Path) -> list[str]:
    return [line for line in (logs / "stderr.txt").read_text().splitlines() if line.startswith("nccl-bench: error:")]


def _thaw_and_cleanup(proc: subprocess.Popen, ranks: dict[int, int]) -> None:
    for pid in ranks.values():
        if alive(pid):
            os.kill(pid, signal.SIGCONT)
    _cleanup(proc)


def _cleanup(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.integration
def test_sigkill_of_one_rank_names_it_and_keeps_every_finished_row(tmp_path):
    out, timeout_s = tmp_path / "run", 30.0
    proc = _start(out, 3, timeout_s, tmp_path)
    try:
        ranks = _ranks_after_rows(proc, out, 3, rows=2)
        rows_before = rows_on_disk(out)
        os.kill(ranks[2], signal.SIGKILL)
        killed_at = time.monotonic()
        survivors_s = _wait_gone([ranks[0], ranks[1]], timeout_s + SLACK_S)
        code = proc.wait(timeout=60)
        # a dead peer closes its sockets: survivors need only the roll call, not the timeout
        assert survivors_s < FAILURE_ROLL_CALL_S + SLACK_S
        assert time.monotonic() - killed_at < timeout_s + SLACK_S
    finally:
        _cleanup(proc)
    assert code != 0
    errors = _error_lines(tmp_path)
    assert len(errors) == 1, errors
    assert "all_reduce at " in errors[0] and "rank 2 on host " in errors[0] and "not answer" in errors[0]
    assert "Traceback" not in (tmp_path / "stdout.txt").read_text()
    rows = read_rows(out)
    assert len(rows) >= rows_before
    assert all(r.status == "ok" and r.wrong == 0 for r in rows)
    meta = read_meta(out)
    assert meta["status"] == "failed" and meta["rows"] == len(rows)
    assert not child_pids(proc.pid) and not any(alive(pid) for pid in ranks.values())


@pytest.mark.integration
def test_frozen_rank_is_named_after_the_timeout(tmp_path):
    out, timeout_s = tmp_path / "run", 5.0
    proc = _start(out, 2, timeout_s, tmp_path)
    ranks: dict[int, int] = {}
    try:
        ranks = _ranks_after_rows(proc, out, 2, rows=2)
        os.kill(ranks[1], signal.SIGSTOP)
        survivor_s = _wait_gone([ranks[0]], timeout_s + FAILURE_ROLL_CALL_S + SLACK_S)
        # The frozen rank cannot act on torchrun's SIGTERM until it runs again (torchrun would
        # SIGKILL it 30 s later); thaw it and it must leave at once.
        os.kill(ranks[1], signal.SIGCONT)
        code = proc.wait(timeout=30)
    finally:
        _thaw_and_cleanup(proc, ranks)
    assert survivor_s >= timeout_s * 0.8  # it waited for gloo's timeout, not less
    assert code != 0
    errors = _error_lines(tmp_path)
    assert len(errors) == 1, errors
    # gloo reports the stall as "Timed out waiting ..." or "Application timeout caused pair closure"
    assert "rank 1 on host " in errors[0] and "(process " in errors[0] and "--timeout 5 s" in errors[0]
    rows = read_rows(out)
    assert len(rows) >= 2 and read_meta(out)["status"] == "failed"
    assert not any(alive(pid) for pid in ranks.values())


@pytest.mark.integration
def test_sigterm_through_torchrun_leaves_a_partial_csv_marked_interrupted(tmp_path):
    out = tmp_path / "run"
    proc = _start(out, 2, 60.0, tmp_path)
    try:
        ranks = _ranks_after_rows(proc, out, 2, rows=2)
        rows_before = rows_on_disk(out)
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        _cleanup(proc)
    assert code != 0
    errors = _error_lines(tmp_path)
    assert errors == ["nccl-bench: error: interrupted by SIGTERM; results measured so far are kept"]
    rows = read_rows(out)
    meta = read_meta(out)
    assert meta["status"] == "interrupted"
    assert meta["rows"] == len(rows) >= rows_before
    assert not any(alive(pid) for pid in ranks.values())


def test_backend_errors_lose_their_source_location_and_boilerplate():
    reset = RuntimeError(
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:33711: "
        "Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the "
        "application. Check the logs of the remote worker before reporting an error. GLHF!"
    )
    timed_out = RuntimeError(
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
        "Timed out waiting 10000ms for recv operation to complete"
    )
    assert backend_error_text(reset) == "Read error [127.0.0.1]:33711: Connection reset by peer"
    assert backend_error_text(timed_out) == "Timed out waiting 10000ms for recv operation to complete"
    assert backend_error_text(RuntimeError("")) == "RuntimeError"


@pytest.mark.integration
def test_dead_peer_reported_within_torchruns_sigterm_grace(tmp_path):
    """Rank 1 frozen mid-sweep at the default --timeout (300 s), torchrun sent SIGTERM: rank 0's main
    thread sits in a gloo wait, where Python never runs its SIGTERM handler; the signal's own thread
    reports and leaves meta.json failed naming rank 1, well before torchrun's SIGKILL 30 s later."""
    out = tmp_path / "run"
    proc = _start(out, 2, None, tmp_path)  # the default --timeout
    ranks: dict[int, int] = {}
    try:
        ranks = _ranks_after_rows(proc, out, 2, rows=2)
        os.kill(ranks[1], signal.SIGSTOP)
        time.sleep(2.0)  # rank 0 is now blocked in the point's collective
        os.kill(proc.pid, signal.SIGTERM)
        survivor_s = _wait_gone([ranks[0]], 28.0)
        meta = read_meta(out)
        os.kill(ranks[1], signal.SIGKILL)  # what torchrun's own SIGKILL does 30 s after its SIGTERM
        code = proc.wait(timeout=60)
    finally:
        _thaw_and_cleanup(proc, ranks)
    assert survivor_s < 25.0  # before torchrun's SIGKILL (30 s after its SIGTERM)
    assert code != 0
    assert meta["status"] == "failed", meta
    assert "rank 1 on host " in meta["failure"] and "(process " in meta["failure"], meta["failure"]
    errors = _error_lines(tmp_path)
    assert len(errors) == 1 and "rank 1 on host " in errors[0], errors
    assert read_rows(out)
