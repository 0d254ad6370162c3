"""`sweep --split` on simulated hosts (network namespaces on a bridge, see tests/helpers/simhosts.py).

Every group measures at once and gets a row of its own; the group holding a shaped path is the
slow one and the summary names it: one host's egress shaped under --split div:2 on four one-rank
hosts, and one host's second interface (rail 1) shaped under --split rail on three two-rank hosts.
Open MPI's environment variables give the layout, with MASTER_ADDR=node001. And hosts are told apart by
hostname, so two machines that share one are named before anything is measured.
"""

from __future__ import annotations

import sys

import pytest

from nccl_bench.errors import EXIT_BAD_INPUT
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import REPO, worker_env
from tests.helpers.simhosts import FABRIC_RATE, hosts_for_test, run_on_hosts

pytestmark = pytest.mark.integration

SHAPED_RATE = "50mbit"  # ~0.006 GB/s: far below FABRIC_RATE, the rate of every other NIC
MASTER_PORT = "29591"
SWEEP_ARGS = ["sweep", "--no-plot", "--op", "all_reduce", "--sizes", "1M", "--iters", "3", "-w", "1", "--timeout", "60"]


@pytest.fixture
def hosts():
    yield from hosts_for_test(4)


@pytest.fixture
def railed_hosts():
    """Three hosts with two ranks each, local rank i on its own interface eth<i>: two rails."""
    yield from hosts_for_test(3, rails=2)


def _sweep(hosts, tmp_path, split: str, ranks_per_host: int) -> tuple[list, str]:
    """The sweep on every host's ranks; (rows of results.csv, rank 0's output)."""
    hosts_file, out = hosts.hosts_file(tmp_path), tmp_path / "run"
    count = len(hosts.hostnames)
    launches = []
    for host, local in ((h, r) for h in range(count) for r in range(ranks_per_host)):
        env = worker_env({"GLOO_SOCKET_IFNAME": f"eth{local}", "MASTER_ADDR": hosts.hostnames[0],
                          "MASTER_PORT": MASTER_PORT, "OMPI_COMM_WORLD_RANK": str(host * ranks_per_host + local),
                          "OMPI_COMM_WORLD_SIZE": str(count * ranks_per_host),
                          "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(ranks_per_host)})
        argv = [sys.executable, "-m", "nccl_bench", *SWEEP_ARGS, "--split", split, "--out", str(out)]
        launches.append((host, argv, env))
    codes, logs = run_on_hosts(hosts, hosts_file, launches, REPO)
    assert codes == [0] * len(launches), logs[0][-4000:]
    return read_rows(out), logs[0]


def _slow_group(rows, log: str, fast: str, slow: str, size: int) -> None:
    """One row per group, each of `size` ranks on as many hosts, and `slow` well below `fast` and named."""
    by_group = {row.group: row for row in rows}
    assert sorted(by_group) == [fast, slow], log[-3000:]
    assert all(row.world_size == size and row.nodes == size and row.wrong == 0 for row in rows)
    assert by_group[slow].busbw_gbps < by_group[fast].busbw_gbps / 2, log[-3000:]
    assert f"#   all_reduce in 1M: {slow} at" in log


def test_the_group_holding_a_shaped_host_is_the_slow_one(hosts, tmp_path):
    hosts.limit_nics(FABRIC_RATE)  # the links, not the CPUs, decide both groups' figures
    hosts.shape_host(2, SHAPED_RATE)
    rows, log = _sweep(hosts, tmp_path, "div:2", ranks_per_host=1)
    _slow_group(rows, log, "rank/2=0", "rank/2=1", size=2)
    assert "--split div:2: 2 groups of 2 ranks measure at once (rank/2=0: ranks 0,1; rank/2=1: ranks 2,3)" in log
    timings = read_meta(tmp_path / "run")["timings"]  # the slowest rank's set-up costs, the split's among them
    assert sorted(timings) == ["first_op_s", "init_s", "split_s"] and all(value > 0 for value in timings.values())
    assert "# set-up (slowest rank): process group " in log and ", split groups " in log


def test_a_shaped_second_interface_makes_rail_1_the_slow_group(railed_hosts, tmp_path):
    railed_hosts.limit_nics(FABRIC_RATE)
    railed_hosts.shape_host(2, SHAPED_RATE, rail=1)  # node003's second NIC
    rows, log = _sweep(railed_hosts, tmp_path, "rail", ranks_per_host=2)
    _slow_group(rows, log, "rail 0", "rail 1", size=3)


@pytest.fixture
def cloned_hosts():
    """Three hosts, the third also called nodea (a cloned image, containers given one --hostname)."""
    yield from hosts_for_test(3, hostnames=("nodea", "nodeb", "nodea"))


def test_two_machines_with_one_hostname_are_named_before_measuring(cloned_hosts, tmp_path):
    """Grouped by hostname, nodea's ranks would be one node: its "intra-node" phases would cross the network."""
    hosts, out = cloned_hosts, tmp_path / "run"
    launches = []
    for rank in range(3):
        env = worker_env({"MASTER_ADDR": hosts.addresses[0], "MASTER_PORT": MASTER_PORT,
                          "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "3",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"})
        launches.append((rank, [sys.executable, "-m", "nccl_bench", *SWEEP_ARGS, "--out", str(out)], env))
    codes, logs = run_on_hosts(hosts, hosts.hosts_file(tmp_path), launches, REPO)
    line = (f"nccl-bench: error: hostname: nodea names 2 different machines (rank(s) 0 at {hosts.addresses[0]}; "
            f"rank(s) 2 at {hosts.addresses[2]}): cloned images or containers given one hostname? Ranks are told "
            "apart by hostname; give each machine its own")
    assert codes == [EXIT_BAD_INPUT] * 3, logs
    assert [[text for text in log.splitlines() if text.startswith("nccl-bench")] for log in logs] == [[line]] * 3, logs
    assert not (out / "results.csv").exists()
