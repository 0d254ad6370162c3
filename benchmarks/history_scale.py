"""Time and peak RSS of `history show --json` and `history check` on a store of 10,000 runs and 10^6 result
rows (100 series: 5 ops x 20 sizes), SQLite by default or a PostgreSQL URL with --history.

The store is filled through its own schema (open_store's migrations) in one bulk transaction, then each
command runs as `python -m nccl_bench ...` in a fresh process; its wall time and peak RSS (wait4's
ru_maxrss) are printed:

    python benchmarks/history_scale.py                       # SQLite in a temporary folder
    python benchmarks/history_scale.py --history postgresql://postgres@/bench?host=/tmp/pg

Targets: each command answers in seconds (<= 30 s here) and its peak RSS stays bounded (<= 256 MiB,
the offline tools' streaming bound): a command that read the whole store would hold ~100 MiB of rows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nccl_bench.history.address import parse_address  # noqa: E402
from nccl_bench.history.store import open_store  # noqa: E402
from nccl_bench.history.store_schema import SERIES_COLUMNS, series_id  # noqa: E402

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
SIZES = tuple(1024 * 2**i for i in range(20))  # 1K .. 512M
MAX_SECONDS = 30.0
MAX_RSS_MIB = 256


def fill(url: str, runs: int) -> int:
    """`runs` runs of every op and size; one in 50 a failed run. Returns the rows written."""
    rows = 0
    with open_store(parse_address(url)) as store, store.transaction():
        cursor = store.connection.cursor()
        columns = ", ".join(SERIES_COLUMNS)
        insert = store._sql(f"INSERT INTO results (run_id, series, {columns}, started_utc, usable, busbw_gbps, "
                            f"time_us) VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 6))})")
        for run in range(runs):
            run_id, started = f"run{run:06d}", f"2026-01-01T00:00:00+00:00#{run:06d}"
            usable = int(run % 50 != 7)
            store.execute("INSERT INTO runs (run_id, kind, status, started_utc, recorded_utc, source, system, "
                          "backend, world_size, nodes, verdict, meta) VALUES (?, 'sweep', ?, ?, ?, '', 'cpu@vm', "
                          "'gloo', 2, 1, '', '{}')",
                          (run_id, "complete" if usable else "failed", started, started))
            batch = []
            for op in OPS:
                for size in SIZES:
                    key = (op, "in_place", size, "float32", 2, 1, "gloo", "cpu@vm")
                    busbw = 10.0 * (1 + 0.05 * ((run * 7 + size) % 5 - 2) / 2)
                    batch.append((run_id, series_id(key), *key, started, usable, busbw, size / busbw / 1e3))
            cursor.executemany(insert, batch)
            if run == 0:
                cursor.executemany(store._sql(f"INSERT INTO series (series, {columns}) VALUES "
                                              f"({', '.join('?' * (len(SERIES_COLUMNS) + 1))})"),
                                   [row[1:2 + len(SERIES_COLUMNS)] for row in batch])
            rows += len(batch)
    return rows


def timed(args: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, exit code) of `python -m nccl_bench ARGS` in a fresh process."""
    start = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "nccl_bench", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    return time.monotonic() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", help="the store to fill (default: an SQLite file in a temporary folder)")
    parser.add_argument("--runs", type=int, default=10_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = options.history or str(Path(folder) / "history.sqlite")
        start = time.monotonic()
        rows = fill(url, options.runs)
        took = time.monotonic() - start
        print(f"# filled {url.split('?')[0]}: {options.runs:,} runs, {rows:,} rows in {took:.1f} s; "
              f"load average {os.getloadavg()[0]:.2f}")
        failed = 0
        for args in (["history", "show", "--json"], ["history", "check"], ["history", "show", "--op", "broadcast"]):
            wall, rss, code = timed([*args, "--history", url])
            ok = wall <= MAX_SECONDS and rss <= MAX_RSS_MIB and code == 0
            failed += not ok
            verdict = "met" if ok else "MISSED"
            print(f"{' '.join(args):32s} {wall:6.2f} s  peak RSS {rss:6.1f} MiB  exit {code}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
