"""`sweep --split` on simulated hosts (network namespaces on a bridge, see tests/simhosts.py).

Every group measures at once and gets a row of its own; the group holding a shaped path is the
slow one and the summary names it: one host's egress shaped under --split div:2 on four one-rank
hosts, and one host's second interface (rail 1) shaped under --split rail on three two-rank hosts.
Open MPI's environment variables give the layout, with MASTER_ADDR=nodea.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, worker_env
from simhosts import SetupError, simulated_hosts, why_no_namespaces

from nccl_bench.results.store import read_rows

pytestmark = pytest.mark.integration

SHAPED_RATE = "50mbit"  # ~0.006 GB/s: far below an unshaped veth pair, even on a loaded machine
MASTER_PORT = "29591"
SWEEP_ARGS = ["sweep", "--op", "all_reduce", "--sizes", "1M", "--iters", "3", "-w", "1", "--timeout", "60"]


def _hosts(count: int, rails: int = 1):
    reason = why_no_namespaces(("ip", "unshare", "mount", "tc"))
    if reason:
        pytest.skip(reason)
    try:
        with simulated_hosts(count, f"{os.getpid() % 10000:04d}", rails) as made:
            yield made
    except SetupError as exc:
        pytest.skip(f"cannot build simulated hosts here: {exc}")


@pytest.fixture
def hosts():
    yield from _hosts(4)


@pytest.fixture
def railed_hosts():
    """Three hosts with two ranks each, local rank i on its own interface eth<i>: two rails."""
    yield from _hosts(3, rails=2)


def _sweep(hosts, tmp_path, split: str, ranks_per_host: int) -> tuple[list, str]:
    """The sweep on every host's ranks; (rows of results.csv, rank 0's output)."""
    hosts_file, out = hosts.hosts_file(tmp_path), tmp_path / "run"
    count = len(hosts.hostnames)
    procs = []
    for host, local in ((h, r) for h in range(count) for r in range(ranks_per_host)):
        env = worker_env({"GLOO_SOCKET_IFNAME": f"eth{local}", "MASTER_ADDR": hosts.hostnames[0],
                          "MASTER_PORT": MASTER_PORT, "OMPI_COMM_WORLD_RANK": str(host * ranks_per_host + local),
                          "OMPI_COMM_WORLD_SIZE": str(count * ranks_per_host),
                          "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(ranks_per_host)})
        argv = [sys.executable, "-m", "nccl_bench", *SWEEP_ARGS, "--split", split, "--out", str(out)]
        procs.append(subprocess.Popen(hosts.command(host, hosts_file, argv), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO))
    try:
        logs = [proc.communicate(timeout=180)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0] * len(procs), logs[0][-4000:]
    return read_rows(out), logs[0]


def test_the_group_holding_a_shaped_host_is_the_slow_one(hosts, tmp_path):
    hosts.shape_host(2, SHAPED_RATE)
    rows, log = _sweep(hosts, tmp_path, "div:2", ranks_per_host=1)
    by_group = {row.group: row for row in rows}
    assert sorted(by_group) == ["rank/2=0", "rank/2=1"], log[-3000:]
    assert all(row.world_size == 2 and row.nodes == 2 and row.wrong == 0 for row in rows)
    assert by_group["rank/2=1"].busbw_gbps < by_group["rank/2=0"].busbw_gbps / 2, log[-3000:]
    assert "#   all_reduce in 1M: rank/2=1 at" in log
    assert "--split div:2: 2 groups of 2 ranks measure at once (rank/2=0: ranks 0,1; rank/2=1: ranks 2,3)" in log


def test_a_shaped_second_interface_makes_rail_1_the_slow_group(railed_hosts, tmp_path):
    railed_hosts.shape_host(2, SHAPED_RATE, rail=1)  # nodec's second NIC
    rows, log = _sweep(railed_hosts, tmp_path, "rail", ranks_per_host=2)
    by_group = {row.group: row for row in rows}
    assert sorted(by_group) == ["rail 0", "rail 1"], log[-3000:]
    assert all(row.world_size == 3 and row.nodes == 3 and row.wrong == 0 for row in rows)
    assert by_group["rail 1"].busbw_gbps < by_group["rail 0"].busbw_gbps / 2, log[-3000:]
    assert "#   all_reduce in 1M: rail 1 at" in log
