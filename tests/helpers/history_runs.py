"""Run folders for the history tests: a sweep's rows and meta.json, or a doctor's doctor.json, written as
the commands write them, with the numbers and start times a test chooses."""

from __future__ import annotations

import json
from pathlib import Path

from nccl_bench.results.run_folder import DOCTOR_JSON, write_meta
from tests.helpers.rows import MiB, row, write_run

SIZES = (64 * 1024, MiB)


def sweep_meta(started: str, hosts=("vm", "vm"), status: str = "complete", versions=None, env=None) -> dict:
    return {"tool": "nccl_bench", "command": "sweep", "status": status, "started_utc": started, "backend": "gloo",
            "devices": ["cpu: AMD EPYC"] * len(hosts), "hostnames": list(hosts), "nodes": len(set(hosts)),
            "world_size": len(hosts), "versions": versions or {"torch": "2.5.1", "nccl": "2.21.5"},
            "env": env or {}}


def sweep_run(folder: Path, day: int, busbw_scale: float = 1.0, **meta) -> Path:
    """A two-rank all_reduce run at 64K and 1M whose busbw is `busbw_scale` x 1 GB/s and 10 GB/s; five trials
    within 2% of each other (one trial's spread 0.86%, so the uncertainty of the run's figure the rule knows
    is 0.48%: records.within_run_noise)."""
    times = [size / (busbw * busbw_scale) / 1e3 for size, busbw in zip(SIZES, (1.0, 10.0), strict=True)]
    rows = [row(size_bytes=size, time_us=time, trials=5, spread=0.01 * time) for size, time in zip(SIZES, times,
                                                                                                   strict=True)]
    write_run(folder, rows)
    write_meta(folder, sweep_meta(f"2026-01-{day:02d}T00:00:00+00:00", **meta))
    return folder


def one_rank_run(folder: Path, day: int, speed: float = 1.0) -> Path:
    """A one-rank all_reduce run at 64K and 1M, as `sweep --workers 1` records it: busbw 0 by definition
    ((n-1)/n at n = 1), algbw `speed` x 1 GB/s and 10 GB/s, three trials within 2%."""
    rows = []
    for size, algbw in zip(SIZES, (1.0, 10.0), strict=True):
        time = size / (algbw * speed) / 1e3
        rows.append(row(size_bytes=size, time_us=time, busbw=0.0, algbw_gbps=size / time / 1e3, busbw_factor=0.0,
                        world_size=1, trials=3, spread=0.01 * time))
    write_run(folder, rows)
    write_meta(folder, sweep_meta(f"2026-03-{day:02d}T00:00:00+00:00", hosts=("vm",)))
    return folder


def doctor_run(folder: Path, day: int, hosts=("a", "b", "c"), suspects=()) -> Path:
    """A doctor run folder of these hosts; suspects: (kind, hosts) pairs."""
    folder.mkdir(parents=True, exist_ok=True)
    doctor = {"schema_version": 2, "verdict": "suspects" if suspects else "healthy",
              "nodes": [{"host": h, "ranks": [i], "verdict": "ok"} for i, h in enumerate(hosts)],
              "suspects": [{"kind": kind, "hosts": list(names), "rail": None} for kind, names in suspects]}
    (folder / DOCTOR_JSON).write_text(json.dumps(doctor))
    write_meta(folder, {**sweep_meta(f"2026-02-{day:02d}T00:00:00+00:00", hosts=hosts), "command": "doctor"})
    return folder


LATE_HOSTS = ("nodea", "nodeb", "nodec")


def late_host_run(folder: Path, day: int, late_us=()) -> Path:
    """A sweep of one rank on each of LATE_HOSTS at 64K and 1M; the first len(late_us) rows name nodeb the
    late host, each as late as its entry of `late_us` (microseconds), as sweep/rows.py writes a late row."""
    rows = [row(size_bytes=size, world_size=len(LATE_HOSTS), nodes=len(LATE_HOSTS),
                **({"late_rank": 1, "late_host": "nodeb", "late_us": late_us[i], "flags": "late"}
                   if i < len(late_us) else {}))
            for i, size in enumerate(SIZES)]
    write_run(folder, rows)
    write_meta(folder, sweep_meta(f"2026-04-{day:02d}T00:00:00+00:00", hosts=LATE_HOSTS))
    return folder
