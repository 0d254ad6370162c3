"""A stalled point ends within --timeout + a few seconds, reported as a timeout, whatever the backend.

Real gloo ranks with a stall planted by the NCCL_BENCH_FAULT test hook (ranks/planted.py): the stalled
rank blocks at the start of a point in native code that no abort reaches, as a rank whose GPU or
host stops answering. Its own deadline (ranks/deadline.py) must end it with the report; its peers'
collective fails on gloo's own timeout (NCCL's order, where the peers' deadlines run out first, and a
stalled rank among several, are in test_stall_blame.py). A short stall: one rank's
collective times out, the other only sees the consequence (a closed connection, torchrun's SIGTERM)
and must still report the timeout, naming --timeout.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED
from nccl_bench.ranks.deadline import GRACE_S, MARGIN_S
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.forked_cli import run_forked
from tests.helpers.launch import REPO, worker_env
from tests.helpers.rows import rows_on_disk

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("timing")]

TIMEOUT_S = 2.0
OPTIONS = ["--op", "all_reduce", "--sizes", "1K,2K,4K,8K", "--iters", "20", "--warmup", "1",
           "--timeout", f"{TIMEOUT_S:g}"]
STALLED_POINT = "all_reduce at 4K (in_place)"  # the third point (index 2): two rows are finished before it
# Process start-up and teardown on 2 shared, busy cores (the stall itself starts after both).
SLACK_S = 10.0


def _workers(n: int) -> list[str]:
    return [sys.executable, "-m", "nccl_bench", "sweep", "--no-plot", "--workers", str(n), *OPTIONS]


def _torchrun(n: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
            "-m", "nccl_bench", "sweep", "--no-plot", *OPTIONS]


def _run(command: list[str], fault: str, out: Path) -> tuple[subprocess.CompletedProcess, float]:
    """Run to the end; also the seconds from the second finished row (the stall starts then) to the exit."""
    proc = subprocess.Popen([*command, "--out", str(out)], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=worker_env({"NCCL_BENCH_FAULT": fault}))
    rows_at, limit = None, time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < limit:
        if rows_at is None and rows_on_disk(out) >= 2:
            rows_at = time.monotonic()
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    stdout, stderr = proc.communicate()
    assert rows_at is not None, f"never reached 2 rows\n{stderr[-3000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), time.monotonic() - rows_at


def _rank_errors(result) -> list[str]:
    """Every error line: the rank's own, never followed by a second one for the failed local workers."""
    return [line for line in result.stderr.splitlines() if line.startswith("nccl-bench: error:")]


def _assert_failed_run_kept_rows(out: Path) -> None:
    rows, meta = read_rows(out), read_meta(out)
    assert meta["status"] == "failed" and meta["rows"] == len(rows) == 2
    assert [r.size_bytes for r in rows] == [1024, 2048] and all(r.status == "ok" for r in rows)


def test_a_lone_rank_stuck_outside_any_collective_is_ended_by_its_deadline(tmp_path):
    out = tmp_path / "run"
    result, after_rows_s = _run(_workers(1), "stall:0:2", out)
    assert result.returncode == EXIT_RUN_FAILED, result.stderr[-3000:]
    # the stall, where the rank stood (its last completed point, the one it is in), torch's flight recorder
    assert [line.partition("flight recorder (gloo): ")[0] for line in _rank_errors(result)] == [
        f"nccl-bench: error: {STALLED_POINT} failed on rank 0: no progress for more than 2 s (--timeout 2 s); "
        "where the ranks stood: rank 0 last completed #2 all_reduce 2K, in #3 all_reduce 4K; "
    ]
    assert "Traceback" not in result.stderr
    assert "api.py" not in result.stderr and "local worker(s)" not in result.stderr  # torch's line, a second line
    _assert_failed_run_kept_rows(out)
    assert after_rows_s < TIMEOUT_S + MARGIN_S + GRACE_S + SLACK_S


@pytest.mark.parametrize("launch", [_torchrun, _workers], ids=["torchrun", "local-workers"])
def test_a_collective_timeout_is_reported_as_a_timeout_not_as_its_consequence(tmp_path, launch):
    """Rank 0 is held up 2.5 s (past --timeout, short of its deadline): rank 1's all_reduce times out,
    rank 0 then finds the connection closed (or torchrun's SIGTERM). The lowest rank reports, and it
    must report rank 1's timeout: before, it said 'Connection closed by peer' or 'interrupted'."""
    out = tmp_path / "run"
    result, after_rows_s = _run(launch(2), "stall:0:2:2.5", out)
    # torchrun's own exit for any failed worker is 1; the ranks' (and local workers') is EXIT_RUN_FAILED
    assert result.returncode == (EXIT_RUN_FAILED if launch is _workers else 1), result.stderr[-3000:]
    errors = _rank_errors(result)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"nccl-bench: error: {STALLED_POINT} failed on rank 1: ")
    assert errors[0].partition("; where the ranks stood: ")[0].endswith("(--timeout 2 s)")
    _assert_failed_run_kept_rows(out)
    assert after_rows_s < TIMEOUT_S + MARGIN_S + GRACE_S + SLACK_S


def test_a_timeout_while_setting_up_names_the_option(tmp_path):
    """--timeout 0.1 is shorter than rank 0's peak measurement (~0.2-1 s) while rank 1 waits for its
    result: the set-up fails, and every rank that says so names --timeout."""
    result = run_forked([*_workers(2)[3:-2], "--timeout", "0.1", "--out", str(tmp_path / "run")], cwd=REPO,
                        env=worker_env())
    assert result.returncode == EXIT_RUN_FAILED, result.stderr[-3000:]
    errors = _rank_errors(result)
    # a store wait during init_process_group says "rendezvous ... within --timeout 0.1 s (...)", a
    # later set-up step ends "(--timeout 0.1 s)": either way the option is named. A rank whose socket to
    # the store's holder broke because that rank ended first says so, and the holder's line names it.
    consequence = "the rank that holds the rendezvous store ended first"
    assert errors and any("--timeout 0.1 s" in line for line in errors), errors
    assert all("--timeout 0.1 s" in line or consequence in line for line in errors), errors
