"""Sweep economy: how much of a sweep's wall time is the collectives themselves.

    python benchmarks/economy.py --config configs/quick.toml --nproc 2 --runs 3

Runs `torchrun --nproc_per_node N -m nccl_bench sweep --config FILE` RUNS times and, from each
run's results.csv and meta.json, computes

    ratio = sweep wall time / (timed op time + warmup op time)

where sweep wall time is meta.json's started_utc .. ended_utc (process group up, header
gathered, every point calibrated, timed, checked, written; the part of a run that grows with
the sweep), timed op time is sum(time_us x iters x trials) and warmup op time is
sum(time_us x warmup) over the rows. Everything else (calibration, the data check, per-op
latency reductions, CSV writes, the live table) is overhead. The target: ratio < 1.5 for
configs/quick.toml on 2 CPU ranks. The launch itself (interpreter and torch start-up,
rendezvous) is printed too but is a fixed cost, not part of the ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 1.5


def op_time_s(rows, warmup: int) -> tuple[float, float]:
    """(timed, warmup) seconds of collective work that the rows account for."""
    timed = sum(r.time_us * r.iters * r.trials for r in rows if r.time_us is not None) * 1e-6
    warm = sum(r.time_us * warmup for r in rows if r.time_us is not None) * 1e-6
    return timed, warm


def one_run(config: Path, nproc: int, out: Path) -> dict:
    from nccl_bench.results.csv_reader import read_rows
    from nccl_bench.results.run_folder import read_meta

    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               "-m", "nccl_bench", "sweep", "--config", str(config), "--out", str(out)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    launch_s = time.perf_counter() - started
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-3000:])
        raise SystemExit(f"economy.py: the sweep failed (exit {result.returncode})")
    meta = read_meta(out)
    rows = read_rows(out)
    started, ended = (dt.datetime.fromisoformat(meta[key]) for key in ("started_utc", "ended_utc"))
    sweep_s = (ended - started).total_seconds()
    timed_s, warm_s = op_time_s(rows, int(meta["config"]["warmup"]))
    return {"launch_s": launch_s, "sweep_s": sweep_s, "timed_s": timed_s, "warmup_s": warm_s,
            "rows": len(rows), "ratio": sweep_s / (timed_s + warm_s)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/quick.toml"))
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="nccl_bench_economy_"))
    print(f"# economy: torchrun --nproc_per_node {args.nproc} -m nccl_bench sweep --config {args.config}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'run':>3} {'rows':>4} {'launch s':>9} {'sweep s':>8} {'timed s':>8} {'warmup s':>9} {'ratio':>6}")
    ratios = []
    for index in range(args.runs):
        run = one_run(args.config, args.nproc, scratch / f"run{index}")
        ratios.append(run["ratio"])
        print(f"{index + 1:>3} {run['rows']:>4} {run['launch_s']:>9.2f} {run['sweep_s']:>8.2f} {run['timed_s']:>8.2f} "
              f"{run['warmup_s']:>9.3f} {run['ratio']:>6.2f}", flush=True)
    median = statistics.median(ratios)
    verdict = "met" if median < TARGET_RATIO else "MISSED"
    print(f"# median ratio {median:.2f} (target < {TARGET_RATIO}): {verdict}; "
          f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if median < TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
