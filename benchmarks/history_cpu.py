"""False alarms and detection power of the history's rule on this host: `--runs` back-to-back CPU sweeps
(two local gloo workers, the default all_reduce sizes unless --sweep-args says otherwise), each recorded
into one history and judged by `history check --run` as CI would. Prints each run's verdict counts and
the narrowest band (as a share below the reference), then the alarms in all. Then, for each of
`--drops`, a copy of the last run with every time scaled up and every bandwidth down by that share, and
recorded as run with another torch and NCCL_ALGO=Tree, is judged in a copy of the history: how many of
its series are flagged at this first judged run, and whether the changes are named. `--busy N` runs N
busy loops beside it all. Exit 1 on any false alarm or any drop not flagged in every series.

    python benchmarks/history_cpu.py --runs 12 [--sweep-args "--trials 3"] [--drops 0.5,0.3] [--busy 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.processes import busy_loops  # noqa: E402

RECORDED = re.compile(r"^recorded run ([0-9a-f]{12}) in the history ", re.M)


def _cli(args: list[str], folder: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    env.pop("NCCL_BENCH_HISTORY", None)
    return subprocess.run([sys.executable, "-m", "nccl_bench", *args], capture_output=True, text=True, cwd=folder,
                          env=env, timeout=1800)


def _slowed_copy(run: Path, target: Path, drop: float) -> Path:
    """`run` copied to `target` with every time / (1 - drop) and every bandwidth x (1 - drop), recorded an hour
    later with another torch and NCCL_ALGO=Tree: what a CI job would see after such a change."""
    from nccl_bench.results.csv_appender import ResultsWriter
    from nccl_bench.results.loader import read_run
    from nccl_bench.results.run_folder import read_meta, write_meta

    keep = 1 - drop
    target.mkdir(parents=True)
    writer = ResultsWriter(target)
    for row in read_run(run, "run").rows:
        times = {f: getattr(row, f) / keep for f in ("time_us", "time_min_us", "time_max_us", "p50_us", "p95_us",
                                                     "p99_us") if getattr(row, f, None) is not None}
        rates = {f: getattr(row, f) * keep for f in ("algbw_gbps", "busbw_gbps") if getattr(row, f) is not None}
        writer.append(dataclasses.replace(row, **times, **rates))
    writer.close()
    meta = read_meta(run)
    meta["started_utc"] = meta["started_utc"][:11] + "23:59:59+00:00"
    meta["versions"] = {**meta.get("versions", {}), "torch": "2.99.0"}
    meta["env"] = {**meta.get("env", {}), "NCCL_ALGO": "Tree"}
    write_meta(target, meta)
    return target


def _judge_drop(folder: Path, store: str, last_run: Path, drop: float) -> bool:
    copy = str(folder / f"drop{drop:g}.sqlite")
    shutil.copyfile(store, copy)
    slowed = _slowed_copy(last_run, folder / f"slowed{drop:g}", drop)
    added = _cli(["history", "add", str(slowed), "--history", copy], folder)
    run_id = re.search(r"\(run ([0-9a-f]{12})\)", added.stdout + added.stderr)
    if added.returncode != 0 or run_id is None:
        print(added.stdout + added.stderr)
        return False
    checked = _cli(["history", "check", "--run", run_id.group(1), "--json", "--history", copy], folder)
    series = json.loads(checked.stdout)["series"]
    flagged = [s for s in series if s["verdict"] == "regression"]
    named = {c.get("what", "") for s in flagged for c in s["changed"]}
    said = [line for line in checked.stderr.splitlines() if "regression:" in line][:1]
    print(f"drop {100 * drop:.0f}%: {len(flagged)} of {len(series)} series flagged at the first judged run "
          f"(exit {checked.returncode}); verdicts {sorted({s['verdict'] for s in series})}; changes named: "
          f"{sorted(named)}" + "".join(f"\n    {line[:400]}" for line in said), flush=True)
    return len(flagged) == len(series) > 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--sweep-args", default="", help="extra sweep options (default: the default sweep)")
    parser.add_argument("--drops", default="", help="comma-separated shares, e.g. 0.5,0.3 (default: none)")
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run beside the sweeps")
    parser.add_argument("--keep", type=Path, help="copy the history of the unchanged runs here at the end")
    options = parser.parse_args()
    with busy_loops(options.busy):
        return _measure(options)


def _measure(options) -> int:
    alarms = 0
    last_run = None
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
            last_run = folder / f"run{index}"
            checked = _cli(["history", "check", "--run", found.group(1), "--json", "--history", store], folder)
            series = json.loads(checked.stdout)["series"]
            flagged = [s for s in series if s["verdict"] == "regression"]
            alarms += len(flagged)
            bands = [1 - s["threshold_busbw_gbps"] / s["median_busbw_gbps"] for s in series
                     if s["threshold_busbw_gbps"] is not None]
            print(f"run {index + 1:2d} {found.group(1)}: {len(series)} series, {len(flagged)} flagged, "
                  f"{sum(s['verdict'] == 'too_few' for s in series)} too few, "
                  f"{sum(s['verdict'] == 'too_noisy' for s in series)} too noisy; narrowest band "
                  f"{'-' if not bands else f'-{100 * min(bands):.0f}%'}, widest "
                  f"{'-' if not bands else f'-{100 * max(bands):.0f}%'}; {time.monotonic() - started:.0f} s"
                  + "".join(f"\n    flagged: {s['op']} {s['size_bytes']} {s['latest_busbw_gbps']:.3g} GB/s "
                            f"({s['change_pct']:+.0f}%)" for s in flagged), flush=True)
        print(f"# alarms: {alarms} in {options.runs} runs; load average {os.getloadavg()[0]:.2f}", flush=True)
        if options.keep is not None:
            shutil.copyfile(store, options.keep)
        missed = [drop for drop in map(float, filter(None, options.drops.split(",")))
                  if not _judge_drop(folder, store, last_run, drop)]
    return 1 if alarms or missed else 0


if __name__ == "__main__":
    sys.exit(main())
