"""The late host named by its host name: four simulated hosts (one gloo rank each, Slurm's layout variables,
clocks aligned across hosts from barrier exits), the third host's rank planted late by 20 ms before every
op (NCCL_BENCH_FAULT=late:2:20000). Every row names that rank and its host, no other; the sweep's end
line says the host's name. 20 ms is far above what this host's scheduler moves an arrival."""

from __future__ import annotations

import sys

import pytest

from nccl_bench.results.csv_reader import read_rows
from tests.helpers.launch import REPO, worker_env
from tests.helpers.simhosts import hosts_for_test, run_on_hosts, slurm_task_env

pytestmark = pytest.mark.integration

HOSTS = 4
MASTER_PORT = "29593"


@pytest.fixture
def hosts():
    yield from hosts_for_test(HOSTS)


def test_a_late_host_is_named_by_its_host_name(hosts, tmp_path):
    out = tmp_path / "run"
    launches = []
    for host in range(HOSTS):
        env = worker_env({**slurm_task_env(hosts, host, MASTER_PORT), "NCCL_BENCH_FAULT": "late:2:20000"})
        argv = [sys.executable, "-m", "nccl_bench", "sweep", "--no-plot",
                "--op", "all_reduce", "--sizes", "1K,64K", "--iters",
                "10", "-w", "2", "--trials", "2", "--timeout", "60", "--no-history", "--out", str(out)]
        launches.append((host, argv, env))
    codes, logs = run_on_hosts(hosts, hosts.hosts_file(tmp_path), launches, REPO)
    assert codes == [0] * HOSTS, (codes, logs[0][-3000:])
    rows = read_rows(out)
    assert [(row.size_bytes, row.late_rank, row.late_host) for row in rows] == [
        (1024, 2, hosts.hostnames[2]), (65536, 2, hosts.hostnames[2])]
    assert all(row.late_us > 10_000 for row in rows)
    assert f"# rank 2 ({hosts.hostnames[2]}) arrived " in logs[0]
