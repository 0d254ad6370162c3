"""Run-to-run spread of the host memcpy reference (%peak on CPU), as two sweeps would see it.

Each measurement is a fresh process (as every sweep is), alternating the current budget with a
shorter one for comparison. Prints every value, then min, max and spread (max-min over median)
per budget. Run it under the project's CPU lock so no other measurement overlaps:

    flock /tmp/nccl_bench_cpu.lock .venv/bin/python benchmarks/memcpy_reference.py --runs 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from nccl_bench.hardware.host import MEMCPY_BUDGET_S

ONE = "from nccl_bench.hardware.host import measure_memcpy as m; r = m({budget}); print(r.gbps, r.repeats)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--short-budget", type=float, default=0.2, help="the budget to compare with (the old 0.2 s)")
    args = parser.parse_args()
    budgets = (MEMCPY_BUDGET_S, args.short_budget)
    values: dict[float, list[float]] = {b: [] for b in budgets}
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for run in range(args.runs):
        for budget in budgets:
            out = subprocess.run([sys.executable, "-c", ONE.format(budget=budget)], capture_output=True, text=True,
                                 check=True).stdout.split()
            values[budget].append(float(out[0]))
            print(f"run {run:2d} budget {budget:4.1f} s: {float(out[0]):6.2f} GB/s ({out[1]} copies)", flush=True)
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for budget in budgets:
        v = values[budget]
        median = statistics.median(v)
        print(f"budget {budget:4.1f} s: min {min(v):.2f}  median {median:.2f}  max {max(v):.2f} GB/s  "
              f"spread {(max(v) - min(v)) / median * 100:.1f}% of the median")


if __name__ == "__main__":
    main()
