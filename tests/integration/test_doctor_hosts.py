"""`nccl-bench doctor` on four simulated hosts (network namespaces on a bridge, one rank each).

Each case injects one fault with tc and checks that the doctor names exactly it: nothing shaped
-> healthy, exit 0; one host's egress through a token bucket (a slow NIC) -> that host as a
`node` and nobody else; one pair shaped both ways with htb + u32 (a bad cable or switch port)
-> that pair as a `link`, neither of its hosts as a node. The three cases use the three
launcher layouts: torchrun with c10d rendezvous on node001's bridge address, Open MPI's and
Slurm's environment variables with MASTER_ADDR=node001 (resolved through each host's /etc/hosts).

Rates: unshaped veth pairs run at 0.2-1 GB/s here (lower while other processes load the two
cores); a shaped path at 200 Mbit/s gives ~0.02 GB/s, >= 10x below (-90% and more). The tests pass
--tolerance 70% because this shared 2-core machine swings healthy pairs by up to 2x between
rounds (benchmarks/RESULTS.md), and a healthy pair once stayed 57% below the median through its
re-test while the whole suite ran beside other jobs; the verdict never widens past 90%, so the
shaped paths are still named.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nccl_bench.render.prom import SUSPECT_KINDS
from tests.helpers.launch import REPO, worker_env
from tests.helpers.simhosts import hosts_for_test, run_on_hosts

pytestmark = pytest.mark.alone

HOSTS = 4
SHAPED_RATE = "200mbit"
RDZV_PORT = 29581
MASTER_PORT = "29582"
DOCTOR_ARGS = ["doctor", "--size", "1M", "--tolerance", "70%", "--timeout", "60"]


@pytest.fixture
def hosts():
    yield from hosts_for_test(HOSTS)


@pytest.fixture
def railed_hosts():
    """Three hosts with two ranks each, rank i on its own interface eth<i>: two rails."""
    yield from hosts_for_test(3, rails=2)


def _launch(hosts, tmp_path, launcher: str, ranks_per_host: int = 1, out_name: str = "run",
            extra: tuple[str, ...] = ()) -> tuple[list[int], str, dict]:
    """Run the doctor on every host with the given launcher layout; (exit codes, rank 0's log, doctor.json)."""
    hosts_file = hosts.hosts_file(tmp_path)
    out = tmp_path / out_name
    launches = []
    count = len(hosts.hostnames)
    for host, local in ((h, r) for h in range(count) for r in range(ranks_per_host)):
        args = [*DOCTOR_ARGS, "--out", str(out), "--json", str(tmp_path / "verdict.json"),
                "--prom", str(tmp_path / "doctor.prom"), *extra]
        env = worker_env({"GLOO_SOCKET_IFNAME": f"eth{local}"})
        rank, world = host * ranks_per_host + local, count * ranks_per_host
        if launcher == "torchrun":
            argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(HOSTS), "--nproc_per_node", "1",
                    "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{hosts.addresses[0]}:{RDZV_PORT}",
                    "--rdzv_id", "doctor-test", "-m", "nccl_bench", *args]
        else:
            argv = [sys.executable, "-m", "nccl_bench", *args]
            env.update({"MASTER_ADDR": hosts.hostnames[0], "MASTER_PORT": MASTER_PORT})
            if launcher == "mpirun":
                env.update({"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
                            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
                            "OMPI_COMM_WORLD_LOCAL_SIZE": str(ranks_per_host)})
            else:
                env.update({"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(world), "SLURM_LOCALID": str(local),
                            "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": str(count)})
        launches.append((host, argv, env))
    codes, logs = run_on_hosts(hosts, hosts_file, launches, REPO)
    report = next((log for log in logs if "# nccl_bench doctor" in log), "\n".join(logs))
    verdict = json.loads((out / "doctor.json").read_text()) if (out / "doctor.json").is_file() else {}
    assert verdict, report[-4000:]
    assert json.loads((tmp_path / "verdict.json").read_text()) == verdict  # --json holds the same document
    _check_prom((tmp_path / "doctor.prom").read_text(), verdict)
    return codes, report, verdict


def _check_prom(text: str, verdict: dict) -> None:
    """--prom: doctor.json's numbers in bytes/s, and 1 for exactly the hosts and kinds it names."""
    metrics = {f.name: f.samples for f in text_string_to_metric_families(text)}
    pairs = {(s.labels["pair"], int(s.labels["rail"])): s.value
             for s in metrics.get("nccl_bench_doctor_pair_busbw_bytes_per_second", [])}
    assert pairs == {(",".join(p["hosts"]), p["rail"]): p["busbw_gbps"] * 1e9 for p in verdict["pairs"]}
    intra = {s.labels["host"]: s.value for s in metrics.get("nccl_bench_doctor_node_busbw_bytes_per_second", [])}
    assert intra == {n["host"]: n["intra_busbw_gbps"] * 1e9 for n in verdict["nodes"] if n["intra_busbw_gbps"]}
    flagged = {(s.labels["host"], s.labels["kind"]) for s in metrics["nccl_bench_doctor_suspect"] if s.value == 1}
    assert flagged == {(host, s["kind"]) for s in verdict["suspects"] for host in s["hosts"]}
    assert len(metrics["nccl_bench_doctor_suspect"]) == len(SUSPECT_KINDS) * len(verdict["nodes"])


def _suspects_exit(ranks: int) -> list[int]:
    """Each rank's exit code, in rank order, for a run with suspects: rank 0 alone exits 1
    (cli/on_ranks.carries_verdict)."""
    return [1] + [0] * (ranks - 1)


def _named(verdict: dict) -> list[tuple[str, list[str]]]:
    return [(s["kind"], s["hosts"]) for s in verdict["suspects"]]


@pytest.mark.integration
def test_healthy_cluster_exit_0(hosts, tmp_path):
    started = time.monotonic()
    codes, report, verdict = _launch(hosts, tmp_path, "torchrun")
    assert codes == [0] * HOSTS, report[-4000:]
    assert verdict["verdict"] == "healthy" and verdict["suspects"] == [], report[-4000:]
    assert sorted(n["host"] for n in verdict["nodes"]) == sorted(hosts.hostnames)
    assert all(n["verdict"] == "ok" and n["intra_busbw_gbps"] is None for n in verdict["nodes"])
    assert len({tuple(p["hosts"]) for p in verdict["pairs"]}) == 6  # every pair of 4 hosts, once
    assert (tmp_path / "run" / "pairs.png").is_file()
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["nodes"] == HOSTS and meta["launcher"] == "torchrun"
    assert "# verdict: healthy" in report
    assert time.monotonic() - started < 120


@pytest.mark.integration
def test_slow_host_is_named_as_a_node_and_kept_so_in_the_history(hosts, tmp_path):
    """A doctor run with one host shaped, recorded by rank 0 into a history: the history shows that
    host flagged as a node and the others never (tests/cli/test_history_cli.py counts over many runs)."""
    hosts.shape_host(2, SHAPED_RATE)
    store = tmp_path / "history.sqlite"
    codes, report, verdict = _launch(hosts, tmp_path, "mpirun", extra=("--no-plot", "--history", str(store)))
    assert codes == _suspects_exit(HOSTS), report[-4000:]
    assert _named(verdict) == [("node", ["node003"])], report[-4000:]
    assert [n["host"] for n in verdict["nodes"] if n["verdict"] == "suspect"] == ["node003"]
    assert "node node003: pair busbw" in report and "with 3 of 3 partners" in report
    slow = {tuple(p["hosts"]) for p in verdict["pairs"] if p["verdict"] == "suspect"}
    assert slow == {("node001", "node003"), ("node002", "node003"), ("node003", "node004")}
    shown = subprocess.run([sys.executable, "-m", "nccl_bench", "history", "nodes", "--json", "--history", str(store)],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    hosts_seen = {h["host"]: (h["runs"], h["flagged"], h["kinds"]) for h in json.loads(shown.stdout)["hosts"]}
    assert hosts_seen == {"node001": (1, 0, {}), "node002": (1, 0, {}), "node003": (1, 1, {"node": 1}),
                          "node004": (1, 0, {})}


@pytest.mark.integration
def test_slow_pair_is_named_as_a_link(hosts, tmp_path):
    hosts.shape_pair(1, 3, SHAPED_RATE)
    codes, report, verdict = _launch(hosts, tmp_path, "slurm", extra=("--no-plot",))
    assert codes == _suspects_exit(HOSTS), report[-4000:]
    assert _named(verdict) == [("link", ["node002", "node004"])], report[-4000:]
    assert all(n["verdict"] == "ok" for n in verdict["nodes"])
    assert "link node002-node004: pair busbw" in report


@pytest.mark.integration
def test_slow_rail_is_named_as_a_rail(railed_hosts, tmp_path):
    railed_hosts.shape_host(2, SHAPED_RATE, rail=1)  # node003's second NIC
    codes, report, verdict = _launch(railed_hosts, tmp_path, "mpirun", ranks_per_host=2, extra=("--no-plot",))
    assert codes == _suspects_exit(6), report[-4000:]
    suspects = [(s["kind"], s["hosts"], s["rail"]) for s in verdict["suspects"]]
    assert suspects == [("rail", ["node003"], 1)], report[-4000:]
    assert "rail 1 of node003: pair busbw" in report
    assert [n["ranks"] for n in verdict["nodes"]] == [[0, 1], [2, 3], [4, 5]]
    assert all(n["intra_busbw_gbps"] > 0 for n in verdict["nodes"])  # each host's all_reduce over its 2 ranks
    assert sorted((tuple(p["hosts"]), p["rail"]) for p in verdict["pairs"]) == [
        (("node001", "node002"), 0), (("node001", "node002"), 1), (("node001", "node003"), 0),
        (("node001", "node003"), 1), (("node002", "node003"), 0), (("node002", "node003"), 1)]
    slow = sorted((tuple(p["hosts"]), p["rail"]) for p in verdict["pairs"] if p["verdict"] == "suspect")
    assert slow == [(("node001", "node003"), 1), (("node002", "node003"), 1)]
