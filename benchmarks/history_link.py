"""The history's false alarms and detection power on real runs over a tc-shaped link (tests/helpers/link_history.py):
`--unchanged` runs at one rate, then `--changed` runs with the link `--slower` (15% by default), each judged
by `history check --run` as CI would. Prints each run's busbw, its within-run spread, the band and the
verdict, then the false alarms among the unchanged runs and whether the first slower run was flagged.
Needs root, iproute2 and tc.

    python benchmarks/history_link.py --unchanged 20 --changed 3 [--slower 0.15] [--rate-kbit 150000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.link_history import RATE_KBIT, check_run, record_run, shape  # noqa: E402
from tests.helpers.simhosts import simulated_hosts, why_no_namespaces  # noqa: E402


def _latest(store: str, folder: Path) -> dict:
    shown = subprocess.run([sys.executable, "-m", "nccl_bench", "history", "check", "--json", "--history", store],
                           capture_output=True, text=True, cwd=folder, env=dict(os.environ, PYTHONPATH=str(REPO)))
    return json.loads(shown.stdout)["series"][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unchanged", type=int, default=20)
    parser.add_argument("--changed", type=int, default=3)
    parser.add_argument("--slower", type=float, default=0.15)
    parser.add_argument("--rate-kbit", type=int, default=RATE_KBIT)
    options = parser.parse_args()
    reason = why_no_namespaces(("ip", "unshare", "mount", "tc"))
    if reason:
        print(f"cannot run: {reason}")
        return 2
    alarms, first_flagged = 0, None
    with tempfile.TemporaryDirectory() as name, simulated_hosts(2, f"{os.getpid() % 10000:04d}") as hosts:
        folder, store = Path(name), str(Path(name) / "link.sqlite")
        shape(hosts, options.rate_kbit)
        record_run(hosts, folder, None, "warm-up")
        print(f"# load average {os.getloadavg()[0]:.2f}; link {options.rate_kbit} kbit/s, then "
              f"{int(options.rate_kbit * (1 - options.slower))} kbit/s")
        for index in range(options.unchanged + options.changed):
            if index == options.unchanged:
                shape(hosts, int(options.rate_kbit * (1 - options.slower)), change=True)
            started = time.monotonic()
            judged = check_run(store, record_run(hosts, folder, store, f"run{index}"), folder)
            series = _latest(store, folder)
            changed = index >= options.unchanged
            flagged = judged.code == 1
            if not changed:
                alarms += flagged
            elif first_flagged is None:
                first_flagged = flagged
            band = series["threshold_busbw_gbps"]
            print(f"{'slower' if changed else 'same  '} run {index + 1:3d} {judged.run_id}  busbw "
                  f"{series['latest_busbw_gbps']:.5f} GB/s  band {'-' if band is None else f'{band:.5f}'}  "
                  f"{series['verdict']:10s} exit {judged.code}  {time.monotonic() - started:5.1f} s", flush=True)
    judged_unchanged = max(0, options.unchanged - 3)
    print(f"# false alarms: {alarms} of {judged_unchanged} judged unchanged runs; first slower run flagged: "
          f"{first_flagged}; load average {os.getloadavg()[0]:.2f}")
    return 0 if alarms == 0 and first_flagged else 1


if __name__ == "__main__":
    sys.exit(main())
