"""Both error rates of the late-rank rule on this host: `--runs` sweeps of `--workers` local gloo ranks with
`NCCL_BENCH_FAULT=late:RANK:US` planted (each should name RANK at every size and no other rank), then
`--runs` sweeps without a fault, beside `--busy` busy loops (each should name no rank). Prints, per size,
how often each rank was named in each kind of run, and the wall time. Exit 1 when a planted run names
another rank or misses RANK, or an unplanted run names any.

    python benchmarks/late_rank.py --runs 20 [--workers 4] [--late 2:300] [--busy 2] [--sizes 1K,64K,1M]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _sweep(workers: int, sizes: str, out: Path, fault: str | None) -> dict[int, int | None]:
    """One sweep's late rank per size (None: none named)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NCCL_BENCH_FAULT", None)
    if fault:
        env["NCCL_BENCH_FAULT"] = fault
    done = subprocess.run([sys.executable, "-m", "nccl_bench", "sweep", "--workers", str(workers), "--op",
                           "all_reduce", "--sizes", sizes, "--out", str(out), "--no-history"],
                          capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"sweep failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    sys.path.insert(0, str(REPO))
    from nccl_bench.results.csv_reader import read_rows

    return {row.size_bytes: row.late_rank for row in read_rows(out)}


def _runs(count: int, workers: int, sizes: str, root: Path, fault: str | None) -> dict[int, Counter]:
    named: dict[int, Counter] = {}
    for run in range(count):
        for size, rank in _sweep(workers, sizes, root / f"{'late' if fault else 'clean'}{run}", fault).items():
            named.setdefault(size, Counter())[rank] += 1
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
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--late", default="2:300", help="RANK:MICROSECONDS of the planted late arrival")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the unplanted sweeps")
    parser.add_argument("--sizes", default="1K,64K,1M")
    options = parser.parse_args()
    late_rank = int(options.late.split(":")[0])
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        planted = _runs(options.runs, options.workers, options.sizes, root, f"late:{options.late}")
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(options.busy)]
        try:
            clean = _runs(options.runs, options.workers, options.sizes, root, None)
        finally:
            for loop in busy:
                loop.kill()
                loop.wait()
    wall = time.monotonic() - started
    print("\n".join(_table(f"planted late:{options.late}, {options.workers} ranks", planted, options.runs)))
    print()
    print("\n".join(_table(f"no fault, {options.busy} busy loops beside, {options.workers} ranks", clean,
                           options.runs)))
    missed = sum(n for counts in planted.values() for rank, n in counts.items() if rank != late_rank)
    wrong = sum(n for counts in clean.values() for rank, n in counts.items() if rank is not None)
    points = options.runs * len(planted)
    print(f"\nplanted: rank {late_rank} named at {points - missed} of {points} points; unplanted: a rank named at "
          f"{wrong} of {options.runs * len(clean)} points; {wall:.0f} s")
    return 1 if missed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
