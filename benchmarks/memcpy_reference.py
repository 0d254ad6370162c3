"""Run-to-run spread of the host memcpy reference (%peak on CPU), as successive sweeps see it.

Each measurement is a fresh process, as every sweep is, starting from an empty record in a
temporary cache folder. Prints per run the reference (the host's fastest copy since boot, from
the record) and the run's own fastest copy, then min, max and spread (max-min over median) of
both, over all runs and over the runs after the first `--settle`. Run it under the CPU lock:

    flock /tmp/nccl_bench_cpu.lock .venv/bin/python benchmarks/memcpy_reference.py --runs 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ONE = "from nccl_bench.hardware.host import measure_memcpy as m; r = m(); print(r.gbps, r.run_gbps, r.repeats)"


def _spread(values: list[float]) -> str:
    median = statistics.median(values)
    return (f"min {min(values):.2f}  median {median:.2f}  max {max(values):.2f} GB/s  "
            f"spread {(max(values) - min(values)) / median * 100:.1f}% of the median")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--settle", type=int, default=3, help="runs after which the record should hold")
    args = parser.parse_args()
    reference, own = [], []
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        for run in range(args.runs):
            out = subprocess.run([sys.executable, "-c", ONE], capture_output=True, text=True, check=True,
                                 env=env).stdout.split()
            reference.append(float(out[0]))
            own.append(float(out[1]))
            print(f"run {run:2d}: reference {reference[-1]:6.2f} GB/s, this run's copies {own[-1]:6.2f} GB/s "
                  f"({out[2]} copies)", flush=True)
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"each run's own copies:        {_spread(own)}")
    print(f"reference, all runs:          {_spread(reference)}")
    print(f"reference, runs {args.settle} and later: {_spread(reference[args.settle:])}")


if __name__ == "__main__":
    main()
