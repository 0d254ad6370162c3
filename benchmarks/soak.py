"""Soak: one long sweep (every op, 1 KiB .. 256 MiB, 4 ranks) while sampling each rank's RSS.

    python benchmarks/soak.py [--ranks 4] [--max-bytes 256M] [--out DIR] [--json FILE]

Starts `torchrun --nproc_per_node N -m nccl_bench sweep --op all ...`, finds the rank processes
among torchrun's children, reads VmRSS from /proc/<pid>/status every SAMPLE_INTERVAL_S and
records how many rows results.csv held at that moment. The run passes when it completes, every
row is ok/unsupported with no wrong element, and RSS is flat: no rank's peak in the last quarter
of the sweep exceeds its peak in the first half by more than LEAK_TOLERANCE (plus LEAK_SLACK_BYTES).
The first half already contains the 256 MiB points of all_reduce, all_gather, reduce_scatter,
broadcast and reduce, so a later, higher peak means memory that was not given back.
Exit 0 pass, 1 fail. Linux only (/proc).
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

from tests.helpers.processes import child_pids, rank_of  # noqa: E402

SAMPLE_INTERVAL_S = 1.0  # fine enough to see a point-by-point climb, cheap on 2 shared cores
LEAK_TOLERANCE = 0.05  # allocator and page-cache jitter between equal-sized points stays below 5%
LEAK_SLACK_BYTES = 32 * 2**20  # absolute slack for small ranks, where 5% is a few MiB
# Every point's buffers are views of two stores allocated once, so even a 256 MiB sweep on 4 ranks
# finishes in well under this; a stuck run must still end.
RUN_LIMIT_S = 3 * 3600


def _rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _rows(csv_path: Path) -> int:
    try:
        return max(0, len(csv_path.read_text().splitlines()) - 1)
    except OSError:
        return 0


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run(ranks: int, max_bytes: str, out: Path, extra: list[str]) -> dict:
    cmd = [
        "torchrun", "--nproc_per_node", str(ranks), "-m", "nccl_bench", "sweep", "--op", "all",
        "--min-bytes", "1K", "--max-bytes", max_bytes, "--out", str(out), "--timeout", "600", *extra,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = open(out.parent / f"{out.name}.log", "w", encoding="utf-8")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    samples: list[dict] = []  # {"t_s", "rows", "rss": {rank: bytes}}
    loads = [_load_average()]
    pids: dict[int, int] = {}
    ticks = 0
    try:
        while proc.poll() is None:
            if time.monotonic() - started > RUN_LIMIT_S:
                proc.terminate()
                break
            for child in child_pids(proc.pid):
                rank = rank_of(child)
                if rank is not None:
                    pids.setdefault(rank, child)
            rss = {rank: _rss_bytes(pid) for rank, pid in pids.items()}
            rss = {rank: value for rank, value in rss.items() if value is not None}
            if rss:
                elapsed_s = round(time.monotonic() - started, 1)
                samples.append({"t_s": elapsed_s, "rows": _rows(out / "results.csv"), "rss": rss})
            ticks += 1
            if ticks % 60 == 0:
                loads.append(_load_average())
            time.sleep(SAMPLE_INTERVAL_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()
    loads.append(_load_average())
    wall_s = round(time.monotonic() - started, 1)
    return {"cmd": cmd, "exit_code": proc.returncode, "wall_s": wall_s, "samples": samples, "load": loads}


def judge(result: dict, out: Path) -> dict:
    from nccl_bench.results.csv_reader import read_rows
    from nccl_bench.results.run_folder import read_meta

    rows = read_rows(out) if (out / "results.csv").exists() else []
    meta = read_meta(out) or {}
    # Start-up (imports, rendezvous) is not the sweep: the windows begin with the first finished row.
    samples = [s for s in result["samples"] if s["rows"] >= 1]
    begin = samples[0]["t_s"] if samples else 0.0
    wall = (samples[-1]["t_s"] - begin) if samples else 0.0
    ranks = sorted({rank for s in samples for rank in s["rss"]})
    per_rank = {}
    flat = bool(samples)
    for rank in ranks:
        series = [(s["t_s"] - begin, s["rss"][rank]) for s in samples if rank in s["rss"]]
        first_half = [rss for t, rss in series if t <= wall / 2]
        last_quarter = [rss for t, rss in series if t >= wall * 3 / 4]
        if not first_half or not last_quarter:
            flat = False
            continue
        early, late = max(first_half), max(last_quarter)
        ok = late <= early * (1 + LEAK_TOLERANCE) + LEAK_SLACK_BYTES
        flat = flat and ok
        per_rank[rank] = {
            "first_mib": round(series[0][1] / 2**20, 1),
            "peak_first_half_mib": round(early / 2**20, 1),
            "peak_last_quarter_mib": round(late / 2**20, 1),
            "final_mib": round(series[-1][1] / 2**20, 1),
            "flat": ok,
        }
    statuses = {}
    for row in rows:
        statuses[row.status] = statuses.get(row.status, 0) + 1
    wrong = sum(r.wrong or 0 for r in rows)
    passed = (
        result["exit_code"] == 0 and meta.get("status") == "complete" and flat and wrong == 0
        and statuses.get("wrong", 0) == 0 and len(rows) == meta.get("rows")
    )
    return {
        "passed": passed, "exit_code": result["exit_code"], "wall_s": result["wall_s"], "status": meta.get("status"),
        "rows": len(rows), "statuses": statuses, "wrong_total": wrong, "ops": sorted({r.op for r in rows}),
        "largest_size_bytes": max((r.size_bytes for r in rows), default=0), "world_size": meta.get("world_size"),
        "rss": per_rank, "samples": len(samples), "load_average": result["load"], "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--max-bytes", default="256M")
    parser.add_argument("--out", type=Path, default=None, help="run folder to create (default: a fresh temp folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the verdict and RSS samples here")
    parser.add_argument("extra", nargs="*", help="more sweep options after --, e.g. -- --warmup 1")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="nccl-bench-soak-")) / "run"
    result = run(args.ranks, args.max_bytes, out, args.extra)
    verdict = judge(result, out)
    print(json.dumps(verdict, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"verdict": verdict, "samples": result["samples"]}, indent=1) + "\n")
    return 0 if verdict["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
