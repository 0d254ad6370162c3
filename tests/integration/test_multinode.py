"""Two hosts simulated with Linux network namespaces joined by a veth pair; torchrun on each.

Each "host" is `ip netns exec <ns> unshare --uts --mount`: its own network stack (one veth end
with a private 10.x address), its own hostname, and its own /etc/hosts (bind-mounted inside the
mount namespace) naming both hosts. torchrun --nnodes 2 --nproc_per_node 2 meets over c10d
rendezvous on the first host's veth address; gloo is told which interface to use. Traffic never
leaves the two namespaces. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2's `ip`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from nccl_bench.units.op_table import OP_NAMES
from tests.helpers.simhosts import sh as _sh
from tests.helpers.simhosts import why_no_namespaces as _why_no_namespaces

SUBNET = "10.77.{}.{}"  # private, and only ever configured inside this test's own namespaces
RDZV_PORT = 29577


@pytest.fixture
def two_hosts(tmp_path):
    """(names, addresses, interfaces) of two namespaces joined by a veth pair; removed afterwards."""
    reason = _why_no_namespaces()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 10000:04d}"
    names = (f"nbA{tag}", f"nbB{tag}")
    ifaces = (f"nbvA{tag}", f"nbvB{tag}")
    subnet = int(tag) % 250
    addresses = (SUBNET.format(subnet, 1), SUBNET.format(subnet, 2))
    try:
        for name in names:
            made = _sh("ip", "netns", "add", name)
            if made.returncode:
                pytest.skip(f"cannot create a network namespace here: {made.stderr.strip()}")
        steps = [
            ("ip", "link", "add", ifaces[0], "type", "veth", "peer", "name", ifaces[1]),
            *[("ip", "link", "set", ifaces[i], "netns", names[i]) for i in (0, 1)],
            *[("ip", "-n", names[i], "addr", "add", f"{addresses[i]}/24", "dev", ifaces[i]) for i in (0, 1)],
            *[("ip", "-n", names[i], "link", "set", dev, "up") for i in (0, 1) for dev in ("lo", ifaces[i])],
        ]
        for step in steps:
            done = _sh(*step)
            if done.returncode:
                pytest.skip(f"cannot wire the namespaces ({' '.join(step)}): {done.stderr.strip()}")
        yield names, addresses, ifaces
    finally:
        for name in names:  # deleting a namespace also deletes the veth end inside it
            _sh("ip", "netns", "delete", name)


@pytest.mark.integration
def test_two_hosts_four_ranks(two_hosts, tmp_path):
    names, addresses, ifaces = two_hosts
    hostnames = ("nodea", "nodeb")
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(f"127.0.0.1 localhost\n{addresses[0]} nodea\n{addresses[1]} nodeb\n")
    out = tmp_path / "run"
    procs = []
    for node in (0, 1):
        script = (
            f"mount --bind {hosts_file} /etc/hosts && hostname {hostnames[node]} && "
            f"exec {sys.executable} -m torch.distributed.run --nnodes 2 --nproc_per_node 2 --node_rank {node} "
            f"--rdzv_backend c10d --rdzv_endpoint {addresses[0]}:{RDZV_PORT} --rdzv_id nb-test "
            f"-m nccl_bench sweep --op all --sizes 64K --iters 3 --warmup 1 --timeout 60 --out {out}"
        )
        env = dict(os.environ, GLOO_SOCKET_IFNAME=ifaces[node], OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", names[node], "unshare", "--uts", "--mount", "sh", "-c", script],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        ))
    try:
        logs = [proc.communicate(timeout=240)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0], "\n".join(log[-3000:] for log in logs)
    meta = read_meta(out)
    assert meta["status"] == "complete"
    assert meta["world_size"] == 4 and meta["nodes"] == 2
    assert meta["hostnames"] == ["nodea", "nodea", "nodeb", "nodeb"]
    rows = read_rows(out)
    assert {r.op for r in rows} == set(OP_NAMES)
    assert all(r.world_size == 4 and r.nodes == 2 for r in rows)
    assert all(r.status == "ok" for r in rows), [(r.op, r.status, r.flags) for r in rows if r.status != "ok"]
    assert all(r.wrong == 0 for r in rows if r.op != "barrier")
    assert socket_hostname_unchanged()


def socket_hostname_unchanged() -> bool:
    """The test's own host keeps its name: the renames happened in the namespaces only."""
    import socket

    return socket.gethostname() not in ("nodea", "nodeb")
