"""`nccl-bench doctor` on simulated hosts: wall time, shaped vs unshaped pair busbw, verdicts.

Builds the same namespaces as tests/integration/test_doctor_hosts.py (tests/simhosts.py: one
rank per host, a Linux bridge, gloo over each host's own interface), then for each scenario
runs the doctor --runs times and prints, per run: the wall time of the whole launch (process
start to exit), the doctor's own wall_s, the verdict, and the busbw of shaped and unshaped
pairs (first attempts; re-tests are listed apart). Needs root, iproute2, tc.

    python benchmarks/doctor_hosts.py --runs 3 [--hosts 4] [--rate 200mbit] [--tolerance 20%]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from simhosts import simulated_hosts, why_no_namespaces  # noqa: E402

SCENARIOS = ("healthy", "node", "link")


def _run(hosts, folder: Path, count: int, tolerance: str, extra: list[str]) -> tuple[float, dict, list[dict]]:
    hosts_file = hosts.hosts_file(folder)
    out = folder / "run"
    procs = []
    started = time.monotonic()
    for host in range(count):
        env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
                   MASTER_ADDR=hosts.hostnames[0], MASTER_PORT="29591", OMPI_COMM_WORLD_RANK=str(host),
                   OMPI_COMM_WORLD_SIZE=str(count), OMPI_COMM_WORLD_LOCAL_RANK="0", OMPI_COMM_WORLD_LOCAL_SIZE="1")
        argv = [sys.executable, "-m", "nccl_bench", "doctor", "--tolerance", tolerance, "--timeout", "60",
                "--out", str(out), *extra]
        procs.append(subprocess.Popen(hosts.command(host, hosts_file, argv), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO))
    for proc in procs:
        proc.communicate(timeout=300)
    wall = time.monotonic() - started
    verdict = json.loads((out / "doctor.json").read_text())
    import csv

    with open(out / "doctor.csv", newline="") as handle:
        records = list(csv.DictReader(handle))
    return wall, verdict, records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rate", default="200mbit", help="tc rate of the shaped host or pair")
    parser.add_argument("--tolerance", default="50%", help="passed to doctor (the tests use 70%%)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="default: all three")
    parser.add_argument("extra", nargs="*", help="more doctor options after --")
    args = parser.parse_args()
    reason = why_no_namespaces(("ip", "unshare", "mount", "tc"))
    if reason:
        print(f"cannot run: {reason}")
        return 2
    print(f"# load average before: {os.getloadavg()}")
    for scenario in args.scenario or SCENARIOS:
        walls, doctor_walls = [], []
        for run in range(args.runs):
            tag = f"{os.getpid() % 10000:04d}"
            with tempfile.TemporaryDirectory() as folder, simulated_hosts(args.hosts, tag) as hosts:
                shaped = set()
                if scenario == "node":
                    hosts.shape_host(2, args.rate)
                    shaped = {h for h in hosts.hostnames if h != hosts.hostnames[2]}
                    shaped = {";".join(sorted((hosts.hostnames[2], h))) for h in shaped}
                elif scenario == "link":
                    hosts.shape_pair(1, 3, args.rate)
                    shaped = {";".join(sorted((hosts.hostnames[1], hosts.hostnames[3])))}
                wall, verdict, records = _run(hosts, Path(folder), args.hosts, args.tolerance, args.extra)
            walls.append(wall)
            doctor_walls.append(verdict["wall_s"])
            pairs = [r for r in records if r["phase"] == "pairs"]
            first = [r for r in pairs if r["attempt"] == "1"]
            key = lambda r: ";".join(sorted(r["hosts"].split(";")))  # noqa: E731
            unshaped = [float(r["best_busbw_gbps"]) for r in first if key(r) not in shaped]
            slow = [float(r["best_busbw_gbps"]) for r in first if key(r) in shaped]
            retested = [f"{r['hosts']}={float(r['best_busbw_gbps']):.3f}" for r in pairs if r["attempt"] != "1"]
            named = [f"{s['kind']} {'-'.join(s['hosts'])}" for s in verdict["suspects"]] or ["nobody"]
            print(f"{scenario:8s} run {run + 1}: launch {wall:5.1f} s, doctor {verdict['wall_s']:4.1f} s, "
                  f"named {', '.join(named)}; unshaped pairs GB/s "
                  f"{', '.join(f'{v:.3f}' for v in sorted(unshaped))}"
                  + (f"; shaped {', '.join(f'{v:.4f}' for v in sorted(slow))}" if slow else "")
                  + (f"; re-tests {', '.join(retested)}" if retested else ""))
            for suspect in verdict["suspects"]:
                print(f"         {suspect['kind']} {'-'.join(suspect['hosts'])}: {suspect['reason']}")
        print(f"{scenario:8s} median launch {statistics.median(walls):.1f} s, "
              f"median doctor {statistics.median(doctor_walls):.1f} s")
    print(f"# load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
