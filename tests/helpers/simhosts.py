"""Simulated hosts: Linux network namespaces on a bridge, each with its own hostname, shaped by tc.

Layout: one "switch" namespace holds a Linux bridge; each host namespace has one veth end per
rail (`eth0`, `eth1`, ...: rail r has a private 10.(78+r).x.y address) whose peer is a bridge port.
A rank that tells gloo to use `eth<r>` (GLOO_SOCKET_IFNAME) sends to rail-r peers through it. Nothing is created in the
test's own namespace, so traffic never leaves the namespaces made here. A host process runs as
`ip netns exec <ns> unshare --uts --mount`: its own hostname and its own /etc/hosts.
Shaping uses what this kernel has (tbf, htb + u32; no netem): a whole host's egress with tbf,
one pair with an htb class and a u32 destination filter on each side.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, TypeVar

SUBNET = "10.{}.{}.{}"  # 10.(78 + rail).x.y: private, only ever configured inside namespaces made here
FIRST_OCTET2 = 78
MAX_HOSTS = 254  # host i is 10.(78 + rail).subnet.(i + 1): one /24 per rail
HOSTNAME_DIGITS = 3  # node001 ... node254, zero-padded as fleets number their hosts
# Every NIC of a test that compares groups' bandwidth between simulated hosts beside the suite's other
# tests (limit_nics): unlimited, a veth pair gives 0.2-1 GB/s on a quiet machine and 0.02-0.03 GB/s with
# the suite's load on both cores; limited, the fast side cannot run away from the slow one on a quiet
# machine either, so a ratio judged between them holds under any load (tests/unit/test_suite_layout.py).
FABRIC_RATE = "400mbit"
T = TypeVar("T")


def sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True)


def why_no_namespaces(tools: tuple[str, ...] = ("ip", "unshare", "mount")) -> str | None:
    """Why namespaces cannot be made here (the exact reason a test skips with), or None."""
    if sys.platform != "linux":
        return f"network namespaces are Linux-only (this is {sys.platform})"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN); run the suite as root to include this test"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install -y iproute2 util-linux)"
    return None


class SetupError(RuntimeError):
    """A step of building the namespaces failed: the message says which command and why."""


def _must(*args: str) -> None:
    done = sh(*args)
    if done.returncode:
        raise SetupError(f"{' '.join(args)}: {done.stderr.strip()}")


def iface(rail: int) -> str:
    """A host's interface for a rail, inside its own namespace."""
    return f"eth{rail}"


def mac(rail: int, host: int) -> str:
    """A host's MAC address on a rail: locally administered (02:...), fixed, so neighbours can be set."""
    return f"02:4e:42:{rail:02x}:{host >> 8:02x}:{host & 0xff:02x}"


def _known_neighbours(namespace: str, host: int, rail_addresses: tuple[tuple[str, ...], ...]) -> None:
    """Every peer's address already resolved (a permanent neighbour entry on each rail): no ARP.

    With N hosts, each starting N-1 connections at once (a rendezvous, every doctor round), the ARP
    broadcasts that the bridge copies to every port number N(N-1) packets at a time, and the kernel's
    per-CPU backlog (net.core.netdev_max_backlog, 1000) drops what does not fit: a connect then fails
    with "No route to host" after the neighbour timeout and is retried (gloo's tcp pair, 3 tries). A
    fleet's switch resolves in hardware; this 2-core machine's bridge should not stand in for it there."""
    lines = [f"neigh replace {addresses[peer]} lladdr {mac(rail, peer)} dev {iface(rail)} nud permanent"
             for rail, addresses in enumerate(rail_addresses) for peer in range(len(addresses)) if peer != host]
    if lines:
        done = subprocess.run(["ip", "-n", namespace, "-batch", "-"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"ip -n {namespace} -batch (permanent neighbours): {done.stderr.strip()}")


@dataclass(frozen=True)
class Hosts:
    namespaces: tuple[str, ...]
    hostnames: tuple[str, ...]
    addresses: tuple[str, ...]  # rail 0's, the one the hostnames resolve to
    rail_addresses: tuple[tuple[str, ...], ...]  # [rail][host]

    def tc(self, host: int, *args: str) -> None:
        _must("ip", "netns", "exec", self.namespaces[host], "tc", *args)

    def limit_nics(self, rate: str) -> None:
        """Every host's NIC, on every rail, sends at most `rate` (htb, its default class 1:20): the fabric,
        not the CPUs, is then what a pair measures. Unlimited, N simulated hosts share this machine's cores,
        and a pair's busbw depends on how many other pairs of its round are still running, and on whatever
        else loads the cores. Call it before shape_host or shape_pair, which then slow one host's class or
        add a pair's class."""
        for host in range(len(self.namespaces)):
            for rail in range(len(self.rail_addresses)):
                self.tc(host, "qdisc", "add", "dev", iface(rail), "root", "handle", "1:", "htb", "default", "20")
                self.tc(host, "class", "add", "dev", iface(rail), "parent", "1:", "classid", "1:20", "htb", "rate",
                        rate, "burst", "64kb")

    def _nics_limited(self, host: int, rail: int = 0) -> bool:
        shown = sh("ip", "netns", "exec", self.namespaces[host], "tc", "qdisc", "show", "dev", iface(rail))
        return "htb 1: root" in shown.stdout

    def shape_host(self, host: int, rate: str, rail: int = 0) -> None:
        """Every packet the host sends on this rail goes through one token bucket: a slow NIC."""
        if self._nics_limited(host, rail):
            self.tc(host, "class", "change", "dev", iface(rail), "parent", "1:", "classid", "1:20", "htb", "rate",
                    rate, "burst", "64kb")
            return
        self.tc(host, "qdisc", "add", "dev", iface(rail), "root", "tbf", "rate", rate, "burst", "64kb",
                "latency", "100ms")

    def shape_pair(self, a: int, b: int, rate: str) -> None:
        """Only traffic between a and b (both ways) is limited: a bad link; all else passes unshaped.

        htb without a default class sends unclassified packets straight through.
        """
        for src, dst in ((a, b), (b, a)):
            if not self._nics_limited(src):
                self.tc(src, "qdisc", "add", "dev", iface(0), "root", "handle", "1:", "htb")
            self.tc(src, "class", "add", "dev", iface(0), "parent", "1:", "classid", "1:10", "htb", "rate", rate,
                    "burst", "64kb")
            self.tc(src, "filter", "add", "dev", iface(0), "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                    "match", "ip", "dst", f"{self.addresses[dst]}/32", "flowid", "1:10")

    def command(self, host: int, hosts_file: Path, argv: list[str]) -> list[str]:
        """argv run as this host: inside its namespace, with its hostname and /etc/hosts."""
        script = f"mount --bind {hosts_file} /etc/hosts && hostname {self.hostnames[host]} && exec \"$@\""
        return ["ip", "netns", "exec", self.namespaces[host], "unshare", "--uts", "--mount",
                "sh", "-c", script, "host", *argv]

    def hosts_file(self, folder: Path) -> Path:
        path = Path(folder) / "hosts"
        entries = "".join(f"{a} {h}\n" for a, h in zip(self.addresses, self.hostnames, strict=True))
        path.write_text("127.0.0.1 localhost\n" + entries)
        return path


def background(command: list[str], env: dict[str, str], cwd: Path, **kwargs) -> subprocess.Popen:
    """A command started in the background: stdout/stderr pipes unless given, text, its own session."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(command, text=True, env=env, cwd=cwd, start_new_session=True, **kwargs)


def fleet_hostnames(count: int, digits: int = HOSTNAME_DIGITS) -> tuple[str, ...]:
    """node001, node002, ...: numbered from 1 and zero-padded, so that Slurm-style hostlists compress
    them (`node[001-064]`) and sorting by name keeps the numeric order."""
    return tuple(f"node{i + 1:0{digits}d}" for i in range(count))


@contextlib.contextmanager
def simulated_hosts(count: int, tag: str, rails: int = 1,
                    hostnames: tuple[str, ...] | None = None) -> Iterator[Hosts]:
    """`count` hosts (at most MAX_HOSTS) named node001, node002, ... (or `hostnames`) with `rails`
    interfaces each, all on one bridge; every namespace is deleted afterwards. tag (e.g. the pid)
    keeps parallel runs apart."""
    if not 1 <= count <= MAX_HOSTS:
        raise SetupError(f"{count} hosts: between 1 and {MAX_HOSTS} fit one /24 per rail")
    switch = f"nbsw{tag}"
    namespaces = tuple(f"nbh{tag}n{i}" for i in range(count))
    hostnames = tuple(hostnames or fleet_hostnames(count))
    if len(hostnames) != count:
        raise SetupError(f"{count} hosts but {len(hostnames)} hostnames: {hostnames}")
    subnet = int(tag) % 250
    rail_addresses = tuple(
        tuple(SUBNET.format(FIRST_OCTET2 + rail, subnet, i + 1) for i in range(count)) for rail in range(rails)
    )
    made: list[str] = []
    try:
        for name in (switch, *namespaces):
            _must("ip", "netns", "add", name)
            made.append(name)
        _must("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        _must("ip", "-n", switch, "link", "set", "br0", "up")
        for i, name in enumerate(namespaces):
            # two subnets on one bridge: a rank bound to eth1 may reach a peer's eth0 address
            for scope in ("all", "default"):
                _must("ip", "netns", "exec", name, "sysctl", "-q", "-w", f"net.ipv4.conf.{scope}.rp_filter=0")
            _must("ip", "-n", name, "link", "set", "lo", "up")
            for rail in range(rails):
                port = f"p{i}r{rail}"
                _must("ip", "link", "add", "name", iface(rail), "address", mac(rail, i), "netns", name, "type", "veth",
                      "peer", "name", port, "netns", switch)
                _must("ip", "-n", switch, "link", "set", port, "master", "br0")
                _must("ip", "-n", switch, "link", "set", port, "up")
                _must("ip", "-n", name, "addr", "add", f"{rail_addresses[rail][i]}/24", "dev", iface(rail))
                _must("ip", "-n", name, "link", "set", iface(rail), "up")
        for i, name in enumerate(namespaces):
            _known_neighbours(name, i, rail_addresses)
        yield Hosts(namespaces, hostnames, rail_addresses[0], rail_addresses)
    finally:
        for name in reversed(made):  # deleting a namespace deletes the veth ends and the bridge in it
            sh("ip", "netns", "delete", name)


def kill_namespace(namespace: str) -> None:
    """SIGKILL every process whose network namespace is this one (only namespaces made here)."""
    for _ in range(5):
        done = sh("ip", "netns", "pids", namespace)
        pids = [int(p) for p in done.stdout.split()] if done.returncode == 0 else []
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


_layouts = itertools.count(1)


def layout_tag() -> str:
    """A tag for simulated hosts' namespace names that no other layout alive in this machine uses:
    the pid (as test_doctor_hosts.py uses it) plus one digit counting this process's layouts, past any
    whose namespace exists (a module's cluster and a test's own cluster are alive at once)."""
    for _ in range(10):
        tag = f"{os.getpid() % 10000:04d}{next(_layouts) % 10}"
        if not Path(f"/run/netns/nbsw{tag}").exists():  # the switch namespace
            break
    return tag


def started_or_skip(why_not: Callable[[], str | None], opened: Callable[[], ContextManager[T]]) -> Iterator[T]:
    """For a fixture to yield from: what `opened()` yields, or the exact reason to skip (the tools missing,
    or hosts that cannot be built here); everything torn down afterwards, failed test or not."""
    import pytest

    reason = why_not()
    if reason:
        pytest.skip(reason)
    try:
        with opened() as made:
            yield made
    except SetupError as exc:
        pytest.skip(f"cannot build simulated hosts here: {exc}")


def hosts_for_test(count: int, rails: int = 1, hostnames: tuple[str, ...] | None = None) -> Iterator[Hosts]:
    """Simulated hosts for a pytest fixture to yield from, or a skip naming the exact reason they
    cannot be made here (no root, a missing tool, a namespace step refused)."""
    import pytest

    reason = why_no_namespaces(("ip", "unshare", "mount", "tc"))
    if reason:
        pytest.skip(reason)
    try:
        with simulated_hosts(count, f"{os.getpid() % 10000:04d}", rails, hostnames) as made:
            yield made
    except SetupError as exc:
        pytest.skip(f"cannot build simulated hosts here: {exc}")


def run_on_hosts(hosts: Hosts, hosts_file: Path, launches: list[tuple[int, list[str], dict[str, str]]],
                 cwd: Path, timeout_s: float = 180) -> tuple[list[int], list[str]]:
    """Start each (host, argv, env) inside its host at once and wait for all; (exit codes, outputs)."""
    procs = [subprocess.Popen(hosts.command(host, hosts_file, argv), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
             for host, argv, env in launches]
    try:
        logs = [proc.communicate(timeout=timeout_s)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return [proc.returncode for proc in procs], logs


def slurm_task_env(hosts: Hosts, host: int, master_port: str) -> dict[str, str]:
    """What Slurm's srun gives the one task on `host` of a step with one task per simulated host, and
    where rank 0's rendezvous is: gloo on the host's own interface."""
    count = len(hosts.hostnames)
    return {"GLOO_SOCKET_IFNAME": "eth0", "MASTER_ADDR": hosts.hostnames[0], "MASTER_PORT": master_port,
            "SLURM_PROCID": str(host), "SLURM_NTASKS": str(count), "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0",
            "SLURM_STEP_NUM_NODES": str(count)}
