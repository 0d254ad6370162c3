"""The suite's ranks forked from a command's zygote against fresh ones: CPU, time, and hangs.

    python benchmarks/forked_ranks.py [--launches 60] [--loops 3]

Runs a three-rank local-workers sweep (a planted late rank, as test_late_rank does) `--launches` times
in `--loops` concurrent loops, twice: through tests/helpers/forked_cli.run_forked, whose commands start
their ranks from the zygote (tests/helpers/rank_zygote.py), and through run_fresh, where the command
and its ranks are fresh interpreters. Prints each way's wall time, the host's CPU time over it (from
/proc/stat: run it on an otherwise quiet machine), the failures, and the launches that did not end
within 60 s (a hang: the zygote's first version had one in about forty launches under load).
Target: every launch passes either way, and a forked launch costs at most half a fresh one's CPU.
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

from tests.helpers.forked_cli import run_forked, run_fresh  # noqa: E402
from tests.helpers.launch import worker_env  # noqa: E402

SWEEP = ["sweep", "--no-plot", "--workers", "3", "--op", "all_reduce", "--sizes", "1K,64K", "--iters", "20",
         "-w", "2", "--trials", "2", "--no-history"]
HANG_S = 60
WAYS = {"forked from the zygote": run_forked, "fresh interpreters": run_fresh}


def _host_cpu_s() -> float:
    """User + system CPU time of the whole host so far, in seconds."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system = (int(value) for value in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def _loop(way: str, count: int, folder: Path) -> None:
    """One loop, in its own process (a fork server serves one command at a time): prints its tally."""
    start = WAYS[way]
    tally = {"passed": 0, "failed": 0, "hung": 0}
    for number in range(count):
        try:
            done = start([*SWEEP, "--out", str(folder / str(number))], cwd=REPO, timeout=HANG_S,
                         env=worker_env({"NCCL_BENCH_FAULT": "late:2:20000"}))
            tally["passed" if done.returncode == 0 else "failed"] += 1
        except subprocess.TimeoutExpired:
            tally["hung"] += 1
    print(json.dumps(tally))


def _measure(way: str, launches: int, loops: int) -> tuple[dict, float]:
    """The tally of `launches` launches started `way`, and the host's CPU seconds per launch."""
    tally = {"passed": 0, "failed": 0, "hung": 0}
    with tempfile.TemporaryDirectory(prefix="forked-ranks-") as folder:
        cpu, wall = _host_cpu_s(), time.monotonic()
        procs = [subprocess.Popen([sys.executable, __file__, "--loop", way, str(launches // loops),
                                   str(Path(folder) / str(number))], stdout=subprocess.PIPE, text=True)
                 for number in range(loops)]
        for proc in procs:
            for key, value in json.loads(proc.communicate()[0].splitlines()[-1]).items():
                tally[key] += value
        wall, cpu = time.monotonic() - wall, _host_cpu_s() - cpu
    total = sum(tally.values())
    print(f"| {way} | {total} | {wall:.0f} | {cpu:.0f} | {cpu / max(total, 1):.2f} | {tally['passed']} | "
          f"{tally['failed']} | {tally['hung']} |", flush=True)
    return tally, cpu / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=60)
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--loop", nargs=3, metavar=("WAY", "COUNT", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop:
        _loop(args.loop[0], int(args.loop[1]), Path(args.loop[2]))
        return
    print("| ranks | launches | wall (s) | host CPU (s) | CPU per launch (s) | passed | failed | hung |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    (forked, forked_cpu), (fresh, fresh_cpu) = (_measure(way, args.launches, args.loops) for way in WAYS)
    whole = all(tally["failed"] == tally["hung"] == 0 for tally in (forked, fresh))
    cheaper = forked_cpu <= fresh_cpu / 2
    print(f"{'PASS' if whole and cheaper else 'FAIL'}: every launch passed: {whole}; a forked launch's CPU "
          f"{forked_cpu:.2f} s against {fresh_cpu:.2f} s fresh (target: at most half)")
    sys.exit(0 if whole and cheaper else 1)


if __name__ == "__main__":
    main()
