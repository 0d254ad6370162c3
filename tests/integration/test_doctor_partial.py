"""A doctor that fails after some pair rounds still says what those rounds support: four simulated
hosts (one rank each, Slurm's layout variables), one rank killed at the start of its third measurement
(the last pair round). The run fails (rank 0 exits 3, as for any lost rank), and doctor.json holds the
verdicts of the results measured before, marked with the run's status and where it stopped; no verdict
of bandwidth is judged here (nothing is shaped), only that the measured rounds were kept and said."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers.launch import REPO, worker_env
from tests.helpers.simhosts import hosts_for_test, run_on_hosts, slurm_task_env

HOSTS = 4
MASTER_PORT = "29591"


@pytest.fixture
def hosts():
    yield from hosts_for_test(HOSTS)


def test_a_doctor_that_fails_after_some_rounds_keeps_their_verdicts(hosts, tmp_path):
    out = tmp_path / "run"
    launches = []
    for host in range(HOSTS):
        env = worker_env({**slurm_task_env(hosts, host, MASTER_PORT), "NCCL_BENCH_FAULT": "crash:2:2"})
        argv = [sys.executable, "-m", "nccl_bench", "doctor", "--no-plot", "--size", "64K", "--timeout", "30",
                "--tolerance", "99%", "--out", str(out)]
        launches.append((host, argv, env))
    codes, logs = run_on_hosts(hosts, hosts.hosts_file(tmp_path), launches, REPO)
    assert codes[0] == 3 and codes[2] == -9, (codes, logs[0][-3000:])
    verdict = json.loads((out / "doctor.json").read_text())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and verdict["status"] == "failed"
    assert verdict["pairs"], "the rounds measured before the failure are kept"
    (said,) = [note for note in verdict["notes"] if note.startswith("the run failed during ")]
    assert said.startswith("the run failed during pair round 3 (") and "result(s) measured before it" in said
    assert "the run failed during pair round 3" in logs[0]  # rank 0's report says it too
