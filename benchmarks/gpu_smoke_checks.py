"""Checks behind benchmarks/gpu_smoke.sh: each subcommand prints one PASS/FAIL line and exits 0/1.

    python benchmarks/gpu_smoke_checks.py run RUN_DIR [--status complete] [--min-rows N]
    python benchmarks/gpu_smoke_checks.py d2d-vs-all-gather RUN_DIR
    python benchmarks/gpu_smoke_checks.py nvml-dump FILE.json

Kept apart from the shell script so the conditions are readable Python, not awk; it reads run
folders with nccl_bench's own reader, so it checks the files a user gets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The all_gather at 16 MiB (world size 1, out of place) is one device-to-device copy of 16 MiB;
# timed inside a CUDA graph it must move data at a copy's rate. Launch overhead is excluded by the
# graph, so the band is about measurement, not about torch's per-op cost.
COPY_RATIO_BAND = (0.5, 1.5)
COPY_BYTES = 16 * 1024 * 1024


def _line(name: str, ok: bool, detail: str) -> int:
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
    return 0 if ok else 1


def check_run(run_dir: Path, name: str, status: str, min_rows: int) -> int:
    from nccl_bench.results.store import read_meta, read_rows

    meta = read_meta(run_dir)
    if meta is None:
        return _line(name, False, f"no meta.json in {run_dir}")
    rows = read_rows(run_dir)
    wrong = sum(r.wrong or 0 for r in rows)
    unchecked = [f"{r.op}@{r.size_bytes}" for r in rows if r.wrong is None and r.status == "ok" and r.op != "barrier"]
    missing_meta = [key for key in ("versions", "config", "hostnames", "devices", "ended_utc") if not meta.get(key)]
    problems = []
    if meta.get("status") != status:
        problems.append(f"meta status {meta.get('status')!r}, expected {status!r}")
    if len(rows) < min_rows:
        problems.append(f"{len(rows)} rows, expected >= {min_rows}")
    if wrong:
        problems.append(f"{wrong} wrong elements")
    if unchecked:
        problems.append(f"unchecked rows: {', '.join(unchecked[:5])}")
    if missing_meta:
        problems.append(f"meta.json lacks {', '.join(missing_meta)}")
    ops = sorted({r.op for r in rows})
    detail = "; ".join(problems) if problems else f"{len(rows)} rows, 0 wrong, status {status}, ops {','.join(ops)}"
    return _line(name, not problems, detail)


def d2d_vs_all_gather(run_dir: Path, name: str) -> int:
    """A 16 MiB copy timed with CUDA events over 100 back-to-back copies, against the run's row."""
    import torch

    from nccl_bench.results.store import read_rows

    rows = [r for r in read_rows(run_dir) if r.op == "all_gather" and r.placement == "out_of_place"
            and r.size_bytes == COPY_BYTES and r.algbw_gbps]
    if not rows:
        return _line(name, False, f"no out-of-place all_gather row at 16 MiB in {run_dir}")
    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_(0, 255)
    target = torch.empty_like(source)
    for _ in range(20):
        target.copy_(source)
    torch.cuda.synchronize()
    rates = []
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(100):
            target.copy_(source)
        stop.record()
        stop.synchronize()
        rates.append(COPY_BYTES / (start.elapsed_time(stop) / 1e3 / 100) / 1e9)
    copy_gbps = sorted(rates)[len(rates) // 2]
    algbw = rows[0].algbw_gbps
    ratio = algbw / copy_gbps
    ok = COPY_RATIO_BAND[0] <= ratio <= COPY_RATIO_BAND[1]
    return _line(name, ok, f"all_gather 16 MiB algbw {algbw:.1f} GB/s vs copy {copy_gbps:.1f} GB/s (ratio {ratio:.2f}, "
                           f"band {COPY_RATIO_BAND[0]}-{COPY_RATIO_BAND[1]})")


def nvml_dump(path: Path) -> int:
    """NVML's raw answers for every GPU, as the tool's NVML probe asks them, saved as a fixture."""
    out: dict = {"errors": []}
    try:
        import pynvml
    except ImportError as exc:
        return _line("nvml dump", False, f"pynvml not importable: {exc}")
    pynvml.nvmlInit()

    def ask(fn, *args):
        try:
            value = fn(*args)
            return value.decode() if isinstance(value, bytes) else value
        except Exception as exc:  # NVMLError_NotSupported and friends are data here
            return {"error": f"{type(exc).__name__}: {exc}"}

    out["driver"] = ask(pynvml.nvmlSystemGetDriverVersion)
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        gpu = {"index": index, "name": ask(pynvml.nvmlDeviceGetName, handle)}
        for getter in ("nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkGeneration",
                       "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetCurrPcieLinkWidth"):
            gpu[getter] = ask(getattr(pynvml, getter), handle)
        gpu["links"] = [{"state": ask(pynvml.nvmlDeviceGetNvLinkState, handle, link),
                         "version": ask(pynvml.nvmlDeviceGetNvLinkVersion, handle, link)}
                        for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))]
        field = pynvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
        values = ask(pynvml.nvmlDeviceGetFieldValues, handle, [field])
        if isinstance(values, dict):
            gpu["nvlink_speed_mbps_common"] = values
        else:
            gpu["nvlink_speed_mbps_common"] = {"nvmlReturn": values[0].nvmlReturn, "value_ui": values[0].value.uiVal}
        gpus.append(gpu)
    out["gpus"] = gpus
    path.write_text(json.dumps(out, indent=1) + "\n")
    return _line("nvml dump", True, f"{len(gpus)} GPU(s) -> {path}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("run_dir", type=Path)
    run.add_argument("--name", default="sweep")
    run.add_argument("--status", default="complete")
    run.add_argument("--min-rows", type=int, default=1)
    copy = sub.add_parser("d2d-vs-all-gather")
    copy.add_argument("run_dir", type=Path)
    copy.add_argument("--name", default="all_gather 16 MiB scales like a copy")
    dump = sub.add_parser("nvml-dump")
    dump.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        return check_run(args.run_dir, args.name, args.status, args.min_rows)
    if args.command == "d2d-vs-all-gather":
        return d2d_vs_all_gather(args.run_dir, args.name)
    return nvml_dump(args.path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
