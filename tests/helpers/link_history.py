"""A link-bound series of real runs for the history's rule: two simulated hosts (simhosts.py), one
rank each, both NICs shaped by a tc token bucket, so all_reduce at 1 MiB is bound by the link (about
0.018 GB/s at 150 Mbit/s, runs within ~1% of each other: as quiet as a GPU fabric). Each sweep records
itself into one history; `check --run` judges the run just recorded. A slower link is the same bucket
at a lower rate (`tc qdisc change`). Shared by tests/integration/test_history_link.py and
benchmarks/history_link.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.simhosts import Hosts, run_on_hosts

REPO = Path(__file__).resolve().parents[1]
RATE_KBIT = 150_000
SWEEP = ["sweep", "--op", "all_reduce", "--sizes", "1M", "--iters", "4", "--warmup", "1", "--trials", "3",
         "--timeout", "60"]
RECORDED = re.compile(r"^recorded run ([0-9a-f]{12}) in the history ", re.M)


@dataclass(frozen=True)
class Judged:
    run_id: str
    code: int  # check --run's exit code
    lines: str  # its report (stdout), then its errors (stderr)


def shape(hosts: Hosts, rate_kbit: int, change: bool = False) -> None:
    """Both hosts' egress through a token bucket of this rate (change: the bucket already exists)."""
    for host in range(len(hosts.namespaces)):
        hosts.tc(host, "qdisc", "change" if change else "add", "dev", "eth0", "root", "tbf", "rate",
                 f"{rate_kbit}kbit", "burst", "64kb", "latency", "100ms")


def record_run(hosts: Hosts, folder: Path, store: str | None, name: str, port: str = "29621") -> str | None:
    """One sweep over the link, recorded into `store` by rank 0; the run id it printed. store None: a
    warm-up run, recorded nowhere (the first run on fresh namespaces was up to 15% slower here)."""
    hosts_file = hosts.hosts_file(folder)
    launches = []
    for host in range(len(hosts.namespaces)):
        env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
                   MASTER_ADDR=hosts.hostnames[0], MASTER_PORT=port, OMPI_COMM_WORLD_RANK=str(host),
                   OMPI_COMM_WORLD_SIZE=str(len(hosts.namespaces)), OMPI_COMM_WORLD_LOCAL_RANK="0",
                   OMPI_COMM_WORLD_LOCAL_SIZE="1")
        env.pop("NCCL_BENCH_HISTORY", None)
        where = ["--history", store] if store else ["--no-history"]
        launches.append((host, [sys.executable, "-m", "nccl_bench", *SWEEP, "--out", str(folder / name), *where],
                         env))
    codes, logs = run_on_hosts(hosts, hosts_file, launches, REPO)
    found = [m.group(1) for log in logs for m in RECORDED.finditer(log)]
    said = "\n".join(log[-3000:] for log in logs)
    assert codes == [0] * len(launches) and len(found) == (1 if store else 0), said
    return found[0] if found else None


def check_run(store: str, run_id: str, folder: Path) -> Judged:
    done = subprocess.run([sys.executable, "-m", "nccl_bench", "history", "check", "--run", run_id, "--history",
                           store], capture_output=True, text=True, cwd=folder, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"))
    return Judged(run_id, done.returncode, done.stdout + done.stderr)
