"""`nccl-bench doctor --config-only` on simulated hosts (network namespaces, one rank each), each host
with its own environment and its own fake nvidia-smi (tests/fixtures/nvidia_smi: a real H100 capture,
changed per host) and its own sysfs tree of RDMA ports (config_facts.SYSFS_ROOT_ENV). Each planted
difference is named as a `config` suspect by host, in one line, and nothing is measured; an identical fleet
raises none. No bandwidth is judged, so the tests need not run alone.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from nccl_bench.doctor.config_facts import SYSFS_ROOT_ENV
from tests.helpers.launch import REPO, worker_env
from tests.helpers.simhosts import hosts_for_test, run_on_hosts

SMI = REPO / "tests" / "fixtures" / "nvidia_smi"
CAPTURE = SMI / "h100_sxm5_passthrough_vm"  # driver 580.159.04, one H100, PCIe Gen5 x16, no ECC error
MASTER_PORT = "29583"
HOSTS = 5
# What each planted host changes in the capture's `nvidia-smi -q` (host index -> (old, new) lines).
DRIVER = ("Driver Version                                         : 580.159.04",
          "Driver Version                                         : 580.65.06")
ECC = ("            DRAM Uncorrectable                         : 0\n        Aggregate",
       "            DRAM Uncorrectable                         : 2\n        Aggregate")
GEN = "                Current                                : "
WIDTH = "Current                                : "
PCIE = ((GEN + "5\n", GEN + "4\n"), (WIDTH + "16x", WIDTH + "8x"))
PLANTED_QUERY = {2: (DRIVER,), 3: (ECC,), 4: PCIE}
PLANTED_ENV = {1: {"NCCL_SOCKET_IFNAME": "eth1"}}
# Each host's RDMA port in a sysfs tree of its own (config_facts.SYSFS_ROOT_ENV): host index -> its state file.
RDMA_RATE = "400 Gb/sec (4X NDR)\n"
RDMA_STATE = "4: ACTIVE\n"
PLANTED_RDMA = {0: "1: DOWN\n"}


@pytest.fixture
def hosts():
    yield from hosts_for_test(HOSTS)


def _machine(folder: Path, changes: tuple[tuple[str, str], ...]) -> Path:
    """A copy of the capture with `changes` made to its `nvidia-smi -q`, each of which must apply."""
    shutil.copytree(CAPTURE, folder)
    query = (CAPTURE / "query.txt").read_text()
    for old, new in changes:
        assert old in query, old
        query = query.replace(old, new, 1)
    (folder / "query.txt").write_text(query)
    return folder


def _sysfs(folder: Path, state: str) -> Path:
    """A sysfs tree holding one RDMA port, mlx5_0/1, in `state` at RDMA_RATE."""
    port = folder / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text(state)
    (port / "rate").write_text(RDMA_RATE)
    return folder


def _doctor(hosts, tmp_path: Path, planted: bool, args: tuple[str, ...] = ("--config-only",)
            ) -> tuple[list[int], str, dict, float]:
    """Every host's rank (Open MPI's layout); (exit codes, rank 0's log, doctor.json, seconds launch to exit)."""
    hosts_file = hosts.hosts_file(tmp_path)
    out = tmp_path / "run"
    launches = []
    for host in range(HOSTS):
        changes = PLANTED_QUERY.get(host, ()) if planted else ()
        machine = _machine(tmp_path / f"smi{host}", changes)
        sysfs = _sysfs(tmp_path / f"sys{host}", PLANTED_RDMA.get(host, RDMA_STATE) if planted else RDMA_STATE)
        env = worker_env({"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0", "MASTER_ADDR": hosts.hostnames[0],
                          "MASTER_PORT": MASTER_PORT, "OMPI_COMM_WORLD_RANK": str(host),
                          "OMPI_COMM_WORLD_SIZE": str(HOSTS), "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                          "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "FAKE_NVIDIA_SMI_DIR": str(machine),
                          SYSFS_ROOT_ENV: str(sysfs),
                          "PATH": f"{SMI}{os.pathsep}{os.environ['PATH']}"})
        if planted:
            env.update(PLANTED_ENV.get(host, {}))
        argv = [sys.executable, "-m", "nccl_bench", "doctor", "--no-plot", *args, "--timeout", "60", "--out", str(out),
                "--exclude-file", str(tmp_path / "exclude.txt")]
        launches.append((host, argv, env))
    started = time.monotonic()
    codes, logs = run_on_hosts(hosts, hosts_file, launches, REPO, timeout_s=120)
    took = time.monotonic() - started
    report = next((log for log in logs if "# nccl_bench doctor" in log), "\n".join(logs))
    doctor = json.loads((out / "doctor.json").read_text()) if (out / "doctor.json").is_file() else {}
    assert doctor, report[-4000:]
    return codes, report, doctor, took


@pytest.mark.integration
def test_each_planted_difference_is_one_config_line_naming_its_host(hosts, tmp_path):
    codes, report, doctor, _ = _doctor(hosts, tmp_path, planted=True)
    assert (tmp_path / "run" / "doctor.csv").read_text() == ""  # nothing measured
    assert codes == [1] + [0] * (HOSTS - 1), report[-4000:]
    expected = [  # facts in the order hosts report them (versions, hardware, environment), then degraded GPUs
        "config node003: driver 580.65.06, 4 others 580.159.04",
        "config node001: rdma mlx5_0/1 DOWN 400 Gb/sec (4X NDR), 4 others ACTIVE 400 Gb/sec (4X NDR)",
        "config node002: env NCCL_SOCKET_IFNAME eth1, 4 others eth0",
        "config node004: GPU 0: 2 volatile uncorrectable ECC error(s)",
        "config node005: GPU 0: PCIe Gen4 x8, its maximum Gen5 x16",
    ]
    assert [line for line in report.splitlines() if line.startswith("config ")] == expected, report[-4000:]
    assert [(s["kind"], s["hosts"], s["degraded"]) for s in doctor["suspects"]] == [
        ("config", ["node003"], False), ("config", ["node001"], False), ("config", ["node002"], False),
        ("config", ["node004"], True), ("config", ["node005"], True)]
    # Broken hardware is kept out; a host that merely differs is named but not excluded.
    assert doctor["exclude"] == ["node004", "node005"]
    assert (tmp_path / "exclude.txt").read_text() == "node004\nnode005\n"
    assert report.index("# config: ") < report.index(expected[0]) < report.index("# verdict: suspects")
    facts = {h["host"]: h["facts"] for h in doctor["config"]["hosts"]}
    assert facts["node003"]["driver"] == {"value": "580.65.06", "source": "nvidia-smi -q"}
    assert facts["node002"]["env NCCL_SOCKET_IFNAME"] == {"value": "eth1", "source": "environment"}
    assert facts["node001"]["rdma mlx5_0/1"] == {"value": "DOWN 400 Gb/sec (4X NDR)", "source": "/sys/class/infiniband"}
    assert SYSFS_ROOT_ENV not in str(facts)  # the hook is nccl_bench's own variable: never compared


@pytest.mark.integration
def test_an_identical_fleet_raises_no_config_suspect(hosts, tmp_path):
    codes, report, doctor, took = _doctor(hosts, tmp_path, planted=False)
    assert codes == [0] * HOSTS, report[-4000:]
    assert doctor["verdict"] == "healthy" and doctor["suspects"] == [] and doctor["exclude"] == []
    assert sorted(h["host"] for h in doctor["config"]["hosts"]) == list(hosts.hostnames)
    assert doctor["config"]["fleet"]["driver"] == "580.159.04"  # a golden file for later runs
    assert doctor["config"]["fleet"]["env NCCL_SOCKET_IFNAME"] == "eth0"
    assert doctor["config"]["fleet"]["rdma mlx5_0/1"] == "ACTIVE 400 Gb/sec (4X NDR)"
    assert "the fleet agrees" in report and "# verdict: healthy" in report
    assert took < 60, took  # seconds, not a measurement: most of it is starting Python and torch on 2 cores


@pytest.mark.integration
def test_the_measuring_doctor_shows_config_findings_before_its_first_round(hosts, tmp_path):
    """It measures the pairs too, but judges none of them (--tolerance 99%: no load names a pair), so it
    runs beside the other tests."""
    codes, report, doctor, _ = _doctor(hosts, tmp_path, planted=True,
                                       args=("--phase", "pairs", "--size", "256K", "--tolerance", "99%"))
    assert codes[0] == 1 and codes[1:] == [0] * (HOSTS - 1), report[-4000:]
    first = report.index("config node003: driver 580.65.06, 4 others 580.159.04")
    assert report.index("# config: ") < first < report.index("# estimate: "), report[-4000:]
    assert len({tuple(p["hosts"]) for p in doctor["pairs"]}) == HOSTS * (HOSTS - 1) // 2  # then every pair
    assert [s["hosts"] for s in doctor["suspects"] if s["kind"] == "config"] == [
        ["node003"], ["node001"], ["node002"], ["node004"], ["node005"]]
