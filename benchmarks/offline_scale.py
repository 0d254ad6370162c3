"""Time and peak RSS of the offline tools on large inputs: `report` of a results.csv with many rows,
`report` of a long nccl-tests log, `compare --junit` of two large runs.

Run it plainly; it generates its inputs in a temporary folder (or --keep DIR) and runs each command
as `python -m nccl_bench ...` in a fresh process, reading that process's own peak RSS (wait4's
ru_maxrss, the peak of the whole process) and its wall time:

    python benchmarks/offline_scale.py                      # the sizes of benchmarks/RESULTS.md
    python benchmarks/offline_scale.py --csv-rows 100000 --log-rows 170000 --junit-rows 4000

The results.csv rows cycle through sizes and ops so no two rows share a key; the nccl-tests log is
nccl_bench's own nccl-tests export of 1,000 such lines (two rows each, out-of-place and in-place)
repeated, as the log of a job that runs the same test again and again.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nccl_bench.results.schema import COLUMNS, PLACEMENT_IN, PLACEMENT_OUT, ResultRow, csv_cells  # noqa: E402
from tests.helpers.rows import row  # noqa: E402

LINES_PER_TABLE = 1_000  # nccl-tests result lines per table of the generated log
# Targets. A streamed report holds one row (or one log table) at a time: its peak RSS is the
# interpreter and its imports (about 25-60 MiB here), whatever the input's size, so a bound far
# below any input's size tells streaming from holding. compare --junit is linear when its CPU time
# per row does not grow with the rows; 2x leaves room for the fixed start-up in the smaller case.
MAX_STREAMED_RSS_MIB = 256
MAX_JUNIT_PER_ROW_GROWTH = 2.0
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


def _nth_row(index: int, placement: str = PLACEMENT_IN) -> ResultRow:
    """Row `index` of the generated results: ops in turn, each size once per op, its time from its size."""
    op = OPS[index % len(OPS)]
    size = 8 * (index // len(OPS) + 1)
    return row(op=op, placement=placement, size_bytes=size, time_us=10.0 + size / 1e4, spread=0.0, dtype="float32",
               redop="none" if op in ("all_gather", "broadcast") else "sum",
               root=0 if op in ("broadcast", "reduce") else -1, world_size=8, backend="nccl", iters=20)


def write_csv(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for index in range(rows):
            writer.writerow(csv_cells(_nth_row(index)))


def write_log(path: Path, rows: int) -> None:
    """An nccl-tests all_reduce log of `rows` rows: one table of LINES_PER_TABLE result lines (two rows
    each, out-of-place and in-place) repeated, as the log of a job running the same test again and again."""
    from nccl_bench.render.nccltests_text import format_text

    table = []
    for index in range(LINES_PER_TABLE):
        size = 8 * (index + 1)
        for placement in (PLACEMENT_OUT, PLACEMENT_IN):
            row = _nth_row(index * len(OPS), placement)  # every index a multiple of len(OPS): all_reduce
            table.append(dataclasses.replace(row, size_bytes=size, count=size // 4))
    text = format_text(table)
    lines = rows // 2
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(lines // LINES_PER_TABLE):
            handle.write(text)


def measure(args: list[str], cwd: Path, repo: Path = REPO) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, peak RSS in bytes, exit code) of `python -m nccl_bench ARGS` (from `repo`)
    in a fresh process. CPU seconds (user + system) are what a shared, loaded machine distorts least."""
    env = {**os.environ, "PYTHONPATH": str(repo), "COLUMNS": "200"}
    began = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "nccl_bench", *args], cwd=cwd, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall_s = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode not in (0, 1):
        print(f"# {' '.join(args)} exited {child.returncode}: {stderr.strip()[-500:]}", file=sys.stderr)
    return wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, child.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv-rows", type=int, default=1_000_000)
    parser.add_argument("--log-rows", type=int, default=1_700_000)
    parser.add_argument("--junit-rows", type=int, nargs="*", default=[4_000, 20_000])
    parser.add_argument("--table-rows", type=int, default=100_000,
                        help="rows of the table-format case (the table is fitted to all rows, so not streamed)")
    parser.add_argument("--keep", type=Path, help="generate the inputs here and keep them")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="run the nccl_bench of this checkout (e.g. main's, for a before/after)")
    options = parser.parse_args()
    folder = options.keep or Path(tempfile.mkdtemp(prefix="nccl_bench_scale_"))
    folder.mkdir(parents=True, exist_ok=True)
    cases: list[tuple[str, list[str]]] = []  # (label, arguments); every report case here is streamed
    if options.csv_rows:
        if not (folder / "big" / "results.csv").exists():  # kept from an earlier --keep run
            write_csv(folder / "big" / "results.csv", options.csv_rows)
        size_mib = (folder / "big" / "results.csv").stat().st_size / 2**20
        for fmt in ("csv", "json", "markdown"):
            cases.append((f"report of {options.csv_rows:,} CSV rows ({size_mib:,.0f} MiB), --format {fmt}",
                          ["report", "big", "--format", fmt, "--output", f"out_csv.{fmt}"]))
    if options.table_rows:
        write_csv(folder / "table" / "results.csv", options.table_rows)
        cases.append((f"report of {options.table_rows:,} CSV rows, --format table",
                      ["report", "table", "--format", "table", "--output", "out.txt"]))
    if options.log_rows:
        write_log(folder / "all_reduce_perf.log", options.log_rows)
        size_mib = (folder / "all_reduce_perf.log").stat().st_size / 2**20
        cases.append((f"report of an nccl-tests log of {options.log_rows:,} rows ({size_mib:,.0f} MiB), --format csv",
                      ["report", "all_reduce_perf.log", "--format", "csv", "--output", "out_log.csv"]))
    for rows in options.junit_rows:
        write_csv(folder / f"junit{rows}" / "results.csv", rows)
        cases.append((f"compare --junit of {rows:,} rows against themselves",
                      ["compare", f"junit{rows}", f"junit{rows}", "--junit", f"junit{rows}.xml"]))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# offline scale: nccl_bench of {options.repo}; {os.cpu_count()} CPU(s); load average {load}")
    print(f"# {'wall (s)':>9} {'CPU (s)':>8} {'peak RSS (MiB)':>15}  exit  case")
    worst_rss, junit_per_row, failed = 0, {}, False
    for label, args in cases:
        wall_s, cpu_s, rss, code = measure(args, folder, options.repo)
        print(f"  {wall_s:9.1f} {cpu_s:8.1f} {rss / 2**20:15,.0f}  {code:4d}  {label}", flush=True)
        failed |= code not in (0, 1)
        if args[0] == "report":
            worst_rss = max(worst_rss, rss)
        else:
            junit_per_row[int(args[1].removeprefix("junit"))] = cpu_s / int(args[1].removeprefix("junit"))
    met = not failed and worst_rss <= MAX_STREAMED_RSS_MIB * 2**20
    print(f"# report: largest peak RSS {worst_rss / 2**20:,.0f} MiB (target <= {MAX_STREAMED_RSS_MIB} MiB)")
    if len(junit_per_row) >= 2:
        low, high = min(junit_per_row), max(junit_per_row)
        growth = junit_per_row[high] / junit_per_row[low]
        met &= growth <= MAX_JUNIT_PER_ROW_GROWTH
        print(f"# compare --junit: CPU per row at {high:,} rows / at {low:,} rows = {growth:.2f} "
              f"(target <= {MAX_JUNIT_PER_ROW_GROWTH})")
    print(f"# verdict: {'met' if met else 'MISSED'}")
    if options.keep is None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
