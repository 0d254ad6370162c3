"""False alarms of the history's rule on this host: `--runs` back-to-back CPU sweeps (two local gloo
workers, the default all_reduce sizes unless --sweep-args says otherwise), each recorded into one history
and judged by `history check --run` as CI would. Prints each run's verdict counts and the narrowest band
(as a share below the reference), then the alarms in all; exit 1 on any alarm.

    python benchmarks/history_cpu.py --runs 12 [--sweep-args "--op all --sizes 1K,64K,1M"]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDED = re.compile(r"^recorded run ([0-9a-f]{12}) in the history ", re.M)


def _cli(args: list[str], folder: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    env.pop("NCCL_BENCH_HISTORY", None)
    return subprocess.run([sys.executable, "-m", "nccl_bench", *args], capture_output=True, text=True, cwd=folder,
                          env=env, timeout=1800)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--sweep-args", default="", help="extra sweep options (default: the default sweep)")
    options = parser.parse_args()
    alarms = 0
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        store = str(folder / "cpu.sqlite")
        print(f"# {options.runs} back-to-back sweeps `sweep {options.sweep_args}`; load average "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        for index in range(options.runs):
            started = time.monotonic()
            swept = _cli(["sweep", *shlex.split(options.sweep_args), "--out", str(folder / f"run{index}"),
                          "--history", store], folder)
            found = RECORDED.search(swept.stderr)
            if swept.returncode != 0 or found is None:
                print(swept.stderr[-3000:])
                return 2
            checked = _cli(["history", "check", "--run", found.group(1), "--json", "--history", store], folder)
            series = json.loads(checked.stdout)["series"]
            flagged = [s for s in series if s["verdict"] == "regression"]
            alarms += len(flagged)
            bands = [1 - s["threshold_busbw_gbps"] / s["median_busbw_gbps"] for s in series
                     if s["threshold_busbw_gbps"] is not None]
            print(f"run {index + 1:2d} {found.group(1)}: {len(series)} series, {len(flagged)} flagged, "
                  f"{sum(s['verdict'] == 'too_few' for s in series)} too few; narrowest band "
                  f"{'-' if not bands else f'-{100 * min(bands):.0f}%'}, widest "
                  f"{'-' if not bands else f'-{100 * max(bands):.0f}%'}; {time.monotonic() - started:.0f} s"
                  + "".join(f"\n    flagged: {s['op']} {s['size_bytes']} {s['latest_busbw_gbps']:.3g} GB/s "
                            f"({s['change_pct']:+.0f}%)" for s in flagged), flush=True)
    print(f"# alarms: {alarms} in {options.runs} runs; load average {os.getloadavg()[0]:.2f}")
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
