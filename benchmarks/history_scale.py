"""Time and peak RSS of the history's commands on a large store: `--runs` runs spread over `--systems`
systems, each run with one value in each of its system's 20 series (5 ops x 4 sizes), one run in 50 a
failed one. SQLite in a temporary folder by default; `--postgres` starts a PostgreSQL server of its own
(tests/helpers/history_stores.py: Debian's postgresql, as root) or `--history URL` names one.

The store is filled through its own schema (open_store's migrations) in bulk, then each command runs as
`python -m nccl_bench ...` in a fresh process; its wall time (interpreter start included), peak RSS
(wait4's ru_maxrss) and exit code are printed:

    python benchmarks/history_scale.py --runs 100000               # SQLite
    python benchmarks/history_scale.py --runs 100000 --postgres    # a PostgreSQL server of its own

Targets: `check --system` of one system's series answers in under a second, whatever the store holds
(it reads each series through its index: DEPTH_WINDOWS x window runs, not the store); whole-store
`check` and `show` answer within 60 s; every command's peak RSS stays under 256 MiB (the offline
tools' streaming bound). tests/cli/test_history_scale.py runs this at a small size so it cannot rot.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nccl_bench.history.address import parse_address  # noqa: E402
from nccl_bench.history.store import open_store  # noqa: E402
from nccl_bench.history.store_schema import SERIES_COLUMNS, series_id  # noqa: E402

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
SIZES = (1024, 65536, 1 << 20, 1 << 26)
MAX_SYSTEM_CHECK_S = 1.0
MAX_SECONDS = 60.0
MAX_RSS_MIB = 256
BATCH_RUNS = 500
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _system(index: int) -> str:
    return f"NVIDIA H100 80GB HBM3 x8 (fleet {index})"


def fill(url: str, runs: int, systems: int) -> int:
    """`runs` runs, round-robin over `systems`, each with a value in every series of its system. A series'
    busbw moves by +-1% (a quiet fabric) with each run's within-run spread 1%. Returns the rows written."""
    rows = 0
    columns = ", ".join(SERIES_COLUMNS)
    with open_store(parse_address(url)) as store:
        marks = ", ".join("?" * (len(SERIES_COLUMNS) + 1))
        store.executemany(f"INSERT INTO series (series, {columns}) VALUES ({marks})",
                          [(series_id(key), *key) for key in _keys(systems)])
        for first in range(0, runs, BATCH_RUNS):
            run_rows, value_rows = [], []
            for run in range(first, min(runs, first + BATCH_RUNS)):
                system = run % systems
                run_id = f"{run:032x}"
                started = (EPOCH + timedelta(minutes=run)).isoformat()  # a run a minute, as a busy fleet records
                usable = int(run % 50 != 7)
                run_rows.append((run_id, "complete" if usable else "failed", started, started, _system(system)))
                for key in _keys(systems, only=system):
                    busbw = 100.0 * (1 + 0.01 * ((run * 7 + key[2]) % 3 - 1))
                    value_rows.append((run_id, series_id(key), *key, started, usable, busbw, key[2] / busbw / 1e3,
                                       0.01))
            with store.transaction():
                store.executemany("INSERT INTO runs (run_id, kind, status, started_utc, recorded_utc, source, system, "
                                  "backend, world_size, nodes, verdict, meta) VALUES (?, 'sweep', ?, ?, ?, '', ?, "
                                  "'nccl', 8, 1, '', '{}')", run_rows)
                store.executemany(f"INSERT INTO results (run_id, series, {columns}, started_utc, usable, busbw_gbps, "
                                  f"time_us, noise) VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 7))})", value_rows)
            rows += len(value_rows)
    return rows


def _keys(systems: int, only: int | None = None) -> list[tuple]:
    return [(op, "in_place", size, "float32", 8, 1, "nccl", _system(system), "")
            for system in (range(systems) if only is None else (only,)) for op in OPS for size in SIZES]


def timed(args: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, exit code) of `python -m nccl_bench ARGS` in a fresh process."""
    start = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "nccl_bench", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    return time.monotonic() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def measure(url: str, runs: int, systems: int) -> int:
    start = time.monotonic()
    rows = fill(url, runs, systems)
    print(f"# {url.split('?')[0]}: {runs:,} runs over {systems} systems, {rows:,} values, filled in "
          f"{time.monotonic() - start:.0f} s; load average {os.getloadavg()[0]:.2f}", flush=True)
    failed = 0
    startup, _, _ = timed(["--version"])
    print(f"{'(interpreter and CLI start: --version)':40s} {startup:6.2f} s", flush=True)
    commands = ((["history", "check", "--system", _system(0)], MAX_SYSTEM_CHECK_S),
                (["history", "check", "--system", _system(0), "--op", "broadcast"], MAX_SYSTEM_CHECK_S),
                (["history", "check"], MAX_SECONDS), (["history", "show", "--json"], MAX_SECONDS))
    for args, limit in commands:
        wall, rss, code = timed([*args, "--history", url])
        ok = wall <= limit and rss <= MAX_RSS_MIB and code == 0
        failed += not ok
        shown = " ".join(f"'{a}'" if " " in a else a for a in args)
        print(f"{shown[:70]:70s} {wall:6.2f} s  peak RSS {rss:6.1f} MiB  exit {code}  "
              f"{'met' if ok else 'MISSED'} (<= {limit:g} s)", flush=True)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", help="the store to fill (default: an SQLite file in a temporary folder)")
    parser.add_argument("--postgres", action="store_true", help="start a PostgreSQL server of its own and use it")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=10)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if options.postgres:
            from tests.helpers.history_stores import PostgresServer, why_no_postgres

            reason = why_no_postgres()
            if reason:
                print(f"cannot start PostgreSQL: {reason}")
                return 2
            os.chmod(folder, 0o777)
            server = PostgresServer(Path(folder))
            try:
                return 1 if measure(server.new_database(), options.runs, options.systems) else 0
            finally:
                server.stop_quietly()
        url = options.history or str(Path(folder) / "history.sqlite")
        return 1 if measure(url, options.runs, options.systems) else 0


if __name__ == "__main__":
    sys.exit(main())
