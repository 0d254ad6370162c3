"""Both error rates of the late-rank rule on this host: `--runs` sweeps with `NCCL_BENCH_FAULT=late:RANK:US`
planted (each should name RANK at every size and no other rank), then `--runs` sweeps without a fault
beside `--busy` busy loops (each should name no rank). Ranks are `--workers` local gloo ranks, or with
`--hosts N` one rank on each of N simulated hosts (tests/helpers/simhosts.py: its own namespace, hostname
and interface; clocks aligned across hosts from barrier exits). Prints, per size, how often each rank was
named in each kind of run, and the wall time. Exit 1 when a planted run names another rank or misses
RANK, or an unplanted run names any. Needs root, iproute2 and tc for --hosts.

    python benchmarks/late_rank.py --runs 20 [--workers 4 | --hosts 4] [--late 2:300] [--busy 2] [--trials 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nccl_bench.results.csv_reader import read_rows  # noqa: E402
from tests.helpers.processes import busy_loops  # noqa: E402
from tests.helpers.simhosts import run_on_hosts, simulated_hosts, slurm_task_env  # noqa: E402

MASTER_PORT = "29594"


def _sweep_argv(options, out: Path) -> list[str]:
    return [sys.executable, "-m", "nccl_bench", "sweep", "--op", "all_reduce", "--sizes", options.sizes,
            "--trials", str(options.trials), "--out", str(out), "--no-history"]


def _env(fault: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NCCL_BENCH_FAULT"}
    env.update(PYTHONPATH=str(REPO), **(extra or {}))
    if fault:
        env["NCCL_BENCH_FAULT"] = fault
    return env


def _local(options, out: Path, fault: str | None) -> None:
    done = subprocess.run([*_sweep_argv(options, out), "--workers", str(options.workers)], capture_output=True,
                          text=True, env=_env(fault), timeout=600, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"sweep failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def _on_hosts(hosts, options, out: Path, fault: str | None) -> None:
    launches = []
    for host in range(options.hosts):
        env = _env(fault, slurm_task_env(hosts, host, MASTER_PORT))
        launches.append((host, _sweep_argv(options, out), env))
    codes, logs = run_on_hosts(hosts, hosts.hosts_file(out.parent), launches, REPO, timeout_s=600)
    if any(codes):
        raise SystemExit(f"sweep failed (exits {codes}):\n{logs[0][-2000:]}")


def _runs(options, root: Path, fault: str | None, hosts) -> dict[int, Counter]:
    named: dict[int, Counter] = {}
    for run in range(options.runs):
        out = root / f"{'late' if fault else 'clean'}{run}"
        if hosts is None:
            _local(options, out, fault)
        else:
            _on_hosts(hosts, options, out, fault)
        for row in read_rows(out):
            named.setdefault(row.size_bytes, Counter())[row.late_rank] += 1
    return named


def _table(title: str, named: dict[int, Counter], runs: int) -> list[str]:
    lines = [f"{title}", "| size (B) | runs | ranks named (rank: runs) | none named |", "|---:|---:|---|---:|"]
    for size, counts in sorted(named.items()):
        ranks = ", ".join(f"{rank}: {n}" for rank, n in sorted((r, n) for r, n in counts.items() if r is not None))
        lines.append(f"| {size:,} | {runs} | {ranks or '-'} | {counts.get(None, 0)} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="sweeps of each kind")
    parser.add_argument("--workers", type=int, default=4, help="local ranks (without --hosts)")
    parser.add_argument("--hosts", type=int, default=0, help="simulated hosts, one rank each (instead of --workers)")
    parser.add_argument("--late", default="2:300", help="RANK:MICROSECONDS of the planted late arrival")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the unplanted sweeps")
    parser.add_argument("--trials", type=int, default=1, help="the sweeps' --trials")
    parser.add_argument("--sizes", default="1K,64K,1M")
    options = parser.parse_args()
    late_rank = int(options.late.split(":")[0])
    ranks = f"{options.hosts} simulated hosts" if options.hosts else f"{options.workers} local ranks"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        root = Path(folder)
        hosts = stack.enter_context(simulated_hosts(options.hosts, f"{os.getpid() % 10000:04d}")) if options.hosts \
            else None
        planted = _runs(options, root, f"late:{options.late}", hosts)
        with busy_loops(options.busy):
            clean = _runs(options, root, None, hosts)
    wall = time.monotonic() - started
    print("\n".join(_table(f"planted late:{options.late}, {ranks}, --trials {options.trials}", planted,
                           options.runs)))
    print()
    print("\n".join(_table(f"no fault, {options.busy} busy loops beside, {ranks}, --trials {options.trials}", clean,
                           options.runs)))
    missed = sum(n for counts in planted.values() for rank, n in counts.items() if rank != late_rank)
    wrong = sum(n for counts in clean.values() for rank, n in counts.items() if rank is not None)
    points = options.runs * len(planted)
    print(f"\nplanted: rank {late_rank} named at {points - missed} of {points} points; unplanted: a rank named at "
          f"{wrong} of {options.runs * len(clean)} points; {wall:.0f} s")
    return 1 if missed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
