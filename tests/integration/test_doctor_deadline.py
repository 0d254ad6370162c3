"""A doctor rank that stops answering ends the run as a stalled sweep rank does: the same life cycle.

Real gloo ranks started by `doctor --workers 2`; rank 1 is SIGSTOPped (a frozen process: it holds its
sockets open and never answers) while the intra-node all_reduce is being measured. Rank 0 must name it,
write `status: failed` into meta.json and end within --timeout plus a few seconds, not wait for the
launcher or the heartbeat monitor.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import worker_env
from tests.helpers.processes import child_pids, rank_of

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("timing")]

TIMEOUT_S = 5.0
# Enough samples that the doctor is still measuring when rank 1 is stopped.
DOCTOR = ["doctor", "--no-plot",
          "--workers", "2", "--phase", "nodes", "--size", "64K", "--iters", "200", "--samples", "1000",
          "--timeout", f"{TIMEOUT_S:g}"]
# What the life cycle adds to --timeout: the deadline's margin, the failure roll call, the report.
SLACK_S = 12.0


def test_a_stopped_doctor_rank_is_named_and_the_run_fails_within_the_timeout(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "nccl_bench", *DOCTOR, "--out", str(out)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=worker_env(), start_new_session=True)
    stopped = None
    try:
        limit = time.monotonic() + 120
        while time.monotonic() < limit and proc.poll() is None:
            meta = read_meta(out) if (out / "meta.json").exists() else None
            if meta and meta["status"] == "running":
                stopped = {rank_of(child): child for child in child_pids(proc.pid)}.get(1)
                if stopped:
                    break
            time.sleep(0.1)
        assert stopped, f"rank 1 never started measuring (exit {proc.poll()})"
        time.sleep(1.0)  # inside the measurement
        os.kill(stopped, signal.SIGSTOP)
        stopped_at = time.monotonic()
        failed_after = None
        while time.monotonic() < stopped_at + TIMEOUT_S + 60 and proc.poll() is None:
            if failed_after is None and read_meta(out)["status"] == "failed":
                failed_after = time.monotonic() - stopped_at
            time.sleep(0.1)
        ended_after = time.monotonic() - stopped_at
    finally:
        if stopped:
            with contextlib.suppress(ProcessLookupError):  # the launcher may have killed it already
                os.kill(stopped, signal.SIGCONT)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
    meta = read_meta(out)
    print(f"failed after {failed_after} s, ended after {ended_after} s\n{stderr}")
    assert meta["status"] == "failed", stderr[-3000:]
    assert failed_after is not None and failed_after < TIMEOUT_S + SLACK_S, (failed_after, stderr[-3000:])
    assert ended_after < TIMEOUT_S + SLACK_S + 5, (ended_after, stderr[-3000:])
    errors = [line for line in stderr.splitlines() if line.startswith("nccl-bench: error:")]
    assert "Traceback" not in stderr and errors, stderr[-3000:]
    assert "rank 1" in errors[0] and "stopped" in errors[0], errors
    assert meta["command"] == "doctor" and "env" in meta and "versions" in meta and "devices" in meta
