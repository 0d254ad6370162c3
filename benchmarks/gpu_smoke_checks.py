"""Checks behind benchmarks/gpu_smoke.sh and gpu_multi.sh: each prints one PASS/FAIL line with the
figure it judged, exits 0 on PASS and 1 on FAIL, and fails when that figure is missing.

    python benchmarks/gpu_smoke_checks.py run RUN_DIR [--status complete] [--min-rows N] [--ranks N]
    python benchmarks/gpu_smoke_checks.py limits FILE.json [--gpu]
    python benchmarks/gpu_smoke_checks.py refused LOG RC --needle TEXT
    python benchmarks/gpu_smoke_checks.py torchrun-exit LOG RC --child CODE
    python benchmarks/gpu_smoke_checks.py stall RUN_DIR LOG RC --timeout S --rows N [--expect-rc C] [--names T]
    python benchmarks/gpu_smoke_checks.py rank-lost RUN_DIR LOG RC [--rank R]
    python benchmarks/gpu_smoke_checks.py doctor RUN_DIR
    python benchmarks/gpu_smoke_checks.py meta-env RUN_DIR [--nccl]
    python benchmarks/gpu_smoke_checks.py calibration RUN_DIR
    python benchmarks/gpu_smoke_checks.py d2d-vs-all-gather RUN_DIR
    python benchmarks/gpu_smoke_checks.py nvml-dump FILE.json

Every command also takes --proves TEXT: what a PASS of this step shows, appended to its line
("; proves: TEXT"), so that a summary says what was proved and what was not (a one-rank step crosses
no link: smoke_lib.sh counts "one rank only" steps apart).

Kept apart from the shell scripts so the conditions are readable Python, not awk; it reads run
folders with nccl_bench's own reader, so it checks the files a user gets.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

# The all_gather at 16 MiB (world size 1, out of place) is one device-to-device copy of 16 MiB;
# timed inside a CUDA graph it must move data at a copy's rate. Launch overhead is excluded by the
# graph, so the band is about measurement, not about torch's per-op cost.
COPY_RATIO_BAND = (0.5, 1.5)
COPY_BYTES = 16 * 1024 * 1024
GRAPH_COPIES = 10  # copies per captured graph, as the smoke run's --cuda-graph 10
REPLAYS = 10  # graph replays per timed sample: 100 copies, as before the copies were captured
# A planted stall may end this long after --timeout + MARGIN_S + GRACE_S, counted from the first
# meta.json: the point measured before the stall, and the final meta.json written.
STALL_SLACK_S = 6.0


class _Said:
    proves = ""  # the step's --proves text, appended to its line


def _line(name: str, ok: bool, detail: str) -> int:
    proves = f"; proves: {_Said.proves}" if _Said.proves else ""
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}{proves}", flush=True)
    return 0 if ok else 1


def check_run(run_dir: Path, name: str, status: str, min_rows: int, ranks: int | None = None) -> int:
    from nccl_bench.ranks.runner import FLAG_EMPTY_GRAPH
    from nccl_bench.sweep.rows import FLAG_ONE_RANK_IN_PLACE

    nothing_measured = (FLAG_EMPTY_GRAPH, FLAG_ONE_RANK_IN_PLACE)
    from nccl_bench.results.csv_reader import read_rows
    from nccl_bench.results.run_folder import read_meta

    meta = read_meta(run_dir)
    if meta is None:
        return _line(name, False, f"no meta.json in {run_dir}")
    rows = read_rows(run_dir)
    wrong = sum(r.wrong or 0 for r in rows)
    unchecked = [f"{r.op}@{r.size_bytes}" for r in rows if r.wrong is None and r.status == "ok" and r.op != "barrier"]
    # A capture that held no GPU work, or an in-place collective of one rank, timed nothing: such a row
    # measured nothing, whatever its figures.
    empty = [r for r in rows if r.status == "ok" and set(nothing_measured) & set(r.flags.split(";"))]
    measured = [r for r in rows if r.status == "ok" and r not in empty]
    missing_meta = [key for key in ("versions", "config", "hostnames", "devices", "ended_utc") if not meta.get(key)]
    problems = []
    if meta.get("status") != status:
        problems.append(f"meta status {meta.get('status')!r}, expected {status!r}")
    if len(measured) < min_rows:
        problems.append(f"{len(measured)} measured rows, expected >= {min_rows}")
    if ranks is not None and meta.get("world_size") != ranks:
        problems.append(f"world size {meta.get('world_size')}, expected {ranks}")
    if wrong:
        problems.append(f"{wrong} wrong elements")
    if unchecked:
        problems.append(f"unchecked rows: {', '.join(unchecked[:5])}")
    if missing_meta:
        problems.append(f"meta.json lacks {', '.join(missing_meta)}")
    ops = sorted({r.op for r in measured})
    said = ", ".join(flag for flag in nothing_measured if any(flag in r.flags.split(";") for r in empty))
    not_counted = f" ({len(empty)} more measured nothing: {said}, not counted)" if empty else ""
    detail = "; ".join(problems) + not_counted if problems else (
        f"{len(measured)} measured of {len(rows)} rows{not_counted}, 0 wrong, status {status}, "
        f"world {meta.get('world_size')}, ops {','.join(ops)}")
    return _line(name, not problems, detail)


def limits(path: Path, name: str, gpu: bool) -> int:
    """`limits --json` names a positive peak with its label and source (on a GPU: not the host's memcpy)."""
    try:
        report = json.loads(path.read_text())
        peak = report["peak"]
        figure, label, source = float(peak["peak_gbps"]), peak["label"], peak["source"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _line(name, False, f"no peak in {path}: {type(exc).__name__}: {exc}")
    problems = [] if figure > 0 and label and source else [f"peak {figure} GB/s, label {label!r}, source {source!r}"]
    if gpu and (not report.get("gpus") or source == "host-memcpy"):
        problems.append(f"{len(report.get('gpus') or [])} GPU(s) described, peak from {source}")
    return _line(name, not problems, "; ".join(problems) or f"peak {figure:.2f} GB/s, {label} [{source}]")


def _log(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def refused(log: Path, rc: int, name: str, needle: str) -> int:
    """Refused before measuring by the process whose exit code was read: exit 2, one error line naming
    the problem, no traceback."""
    from nccl_bench.errors import EXIT_BAD_INPUT

    text = _log(log)
    lines = [line for line in text.splitlines() if line.startswith("nccl-bench: error:")]
    problems = []
    if rc != EXIT_BAD_INPUT:
        problems.append(f"exit {rc}, expected {EXIT_BAD_INPUT}")
    if not any(needle in line for line in lines):
        problems.append(f"no error line naming {needle!r}")
    if "Traceback" in text:
        problems.append("a traceback")
    detail = "; ".join(problems) + (f": {text.strip().splitlines()[-1]}" if problems and text.strip() else "")
    return _line(name, not problems, detail or f"exit {rc}: {lines[0]}")


_CHILD_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")


def torchrun_exit(log: Path, rc: int, name: str, child: int) -> int:
    """torchrun exits 1 whatever its worker's code; the worker's own code is in torchrun's summary."""
    found = _CHILD_EXIT.search(_log(log))
    seen = int(found.group(1)) if found else None
    ok = rc == 1 and seen == child
    return _line(name, ok, f"torchrun exit {rc} (expected 1), worker exit {seen} (expected {child})")


def failed_run_code() -> int:
    """The exit code the tool itself gives a run that failed."""
    from nccl_bench.errors import RunFailedError

    return RunFailedError("").exit_code


def _seconds(meta: dict, key: str) -> float | None:
    try:
        return datetime.datetime.fromisoformat(meta[key]).timestamp()
    except (KeyError, TypeError, ValueError):
        return None


def stall(run_dir: Path, log: Path, rc: int, name: str, timeout_s: float, rows: int, expect_rc: int | None = None,
          names: str = "", slack_s: float = 0.0) -> int:
    """A planted stall ended by the rank's deadline: the run's own exit code (no SIGABRT), the timeout
    named, `status: failed` with the rows before it kept, and the run over before NCCL's watchdog could
    have acted (its group timeout is --timeout + MARGIN_S + GRACE_S + NCCL_WATCHDOG_LAG_S)."""
    from nccl_bench.ranks.deadline import GRACE_S, MARGIN_S
    from nccl_bench.ranks.dist import NCCL_WATCHDOG_LAG_S
    from nccl_bench.results.csv_reader import read_rows
    from nccl_bench.results.run_folder import read_meta

    text, meta = _log(log), read_meta(run_dir) or {}
    started, ended = _seconds(meta, "started_utc"), _seconds(meta, "ended_utc")
    ran_s = None if started is None or ended is None else ended - started
    bound_s = timeout_s + MARGIN_S + GRACE_S + STALL_SLACK_S + slack_s
    expect_rc = failed_run_code() if expect_rc is None else expect_rc
    watchdog_s = timeout_s + MARGIN_S + GRACE_S + NCCL_WATCHDOG_LAG_S
    kept = len(read_rows(run_dir)) if meta else 0
    problems = []
    if rc != expect_rc:
        problems.append(f"exit {rc}, expected {expect_rc}" + (" (SIGABRT)" if rc in (134, -6) else ""))
    if any(word in text for word in ("SIGABRT", "Signal 6", "Aborted (core dumped)")):
        problems.append("SIGABRT in the log")
    if "--timeout" not in text:
        problems.append("no line naming --timeout")
    if meta.get("status") != "failed" or kept != rows:
        problems.append(f"meta status {meta.get('status')!r} with {kept} row(s), expected 'failed' with {rows}")
    if ran_s is None or ran_s > bound_s or ran_s >= watchdog_s:
        problems.append(f"ran {ran_s} s, expected <= {bound_s:g} s (the watchdog would act at {watchdog_s:g} s)")
    line = next((x for x in text.splitlines() if x.startswith("nccl-bench: error:")), "")
    if names not in line:
        problems.append(f"the error line does not name {names!r}: {line!r}")
    detail = "; ".join(problems) or (
        f"ended {ran_s:.1f} s after it began (--timeout {timeout_s:g}), exit {rc}, {kept} row(s) kept: {line}")
    return _line(name, not problems, detail)


def rank_lost(run_dir: Path, log: Path, rc: int, name: str, rank: int) -> int:
    """A rank killed mid-run: a non-zero exit, meta.json "failed" with rows kept, the dead rank named."""
    from nccl_bench.results.csv_reader import read_rows
    from nccl_bench.results.run_folder import read_meta

    meta = read_meta(run_dir) or {}
    kept = len(read_rows(run_dir)) if meta else 0
    lines = [x for x in _log(log).splitlines() if x.startswith("nccl-bench: error:")]
    problems = []
    if rc == 0:
        problems.append("exit 0")
    if meta.get("status") != "failed" or kept < 1:
        problems.append(f"meta status {meta.get('status')!r} with {kept} row(s), expected 'failed' with rows kept")
    if not any(f"rank {rank}" in line for line in lines):
        problems.append(f"no error line names rank {rank}: {lines[:1]}")
    return _line(name, not problems, "; ".join(problems) or f"exit {rc}, {kept} row(s) kept: {lines[0]}")


def doctor(run_dir: Path, name: str) -> int:
    """A doctor run that completed, with a verdict and the node's intra-node busbw measured."""
    from nccl_bench.results.run_folder import read_meta

    meta = read_meta(run_dir) or {}
    try:
        report = json.loads((run_dir / "doctor.json").read_text())
        intra = [node["intra_busbw_gbps"] for node in report["nodes"]]
        verdict = report["verdict"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _line(name, False, f"no doctor.json verdict in {run_dir}: {type(exc).__name__}: {exc}")
    ok = meta.get("status") == "complete" and bool(intra) and all(isinstance(v, float) and v > 0 for v in intra)
    return _line(name, ok, f"status {meta.get('status')!r}, verdict {verdict}, intra-node busbw {intra} GB/s")


def meta_env(run_dir: Path, name: str, nccl: bool) -> int:
    """meta.json records NCCL_DEBUG and TORCH_FR_BUFFER_SIZE as set; on NCCL also the library's version
    and the error handling the ranks ran with: 2, set by the tool (the step sets none of its own)."""
    from nccl_bench.results.run_folder import read_meta

    meta = read_meta(run_dir) or {}
    env, version = meta.get("env") or {}, (meta.get("versions") or {}).get("nccl")
    ok = env.get("NCCL_DEBUG") == "WARN" and env.get("TORCH_FR_BUFFER_SIZE") == "0"
    detail = f"env {sorted(env)}"
    if nccl:
        import torch

        want = ".".join(map(str, torch.cuda.nccl.version()))
        handling = meta.get("error_handling") or {}
        mode = env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")
        ok = ok and version == want and mode == handling.get("value") == "2" and handling.get("set_by") == "nccl-bench"
        detail += f", versions.nccl {version} (library {want}), TORCH_NCCL_ASYNC_ERROR_HANDLING {mode} " \
                  f"set by {handling.get('set_by')}"
    return _line(name, ok, detail)


def calibration(run_dir: Path, name: str) -> int:
    """A small out-of-place reduce_scatter must not settle at the minimum iterations."""
    from nccl_bench.results.csv_reader import read_rows

    rows = read_rows(run_dir) if (run_dir / "results.csv").is_file() else []
    bad = [f"{r.size_bytes}: iters {r.iters} {r.flags}" for r in rows
           if r.iters <= 3 or "below_timer_resolution" in r.flags]
    detail = "; ".join(bad) or ", ".join(f"{r.size_bytes} B: {r.iters} iters" for r in rows) or f"no rows in {run_dir}"
    return _line(name, bool(rows) and not bad, detail)


def d2d_vs_all_gather(run_dir: Path, name: str) -> int:
    """A 16 MiB copy captured in a CUDA graph (GRAPH_COPIES per graph, as the sweep's --cuda-graph 10
    captures its ops) and timed with CUDA events over replays, against the run's graph-replayed row."""
    import torch

    from nccl_bench.results.csv_reader import read_rows

    rows = [r for r in read_rows(run_dir) if r.op == "all_gather" and r.placement == "out_of_place"
            and r.size_bytes == COPY_BYTES and r.algbw_gbps]
    if not rows:
        return _line(name, False, f"no out-of-place all_gather row at 16 MiB in {run_dir}")
    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_(0, 255)
    target = torch.empty_like(source)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        target.copy_(source)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_COPIES):
            target.copy_(source)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    rates = []
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPLAYS):
            graph.replay()
        stop.record()
        stop.synchronize()
        rates.append(COPY_BYTES / (start.elapsed_time(stop) / 1e3 / (REPLAYS * GRAPH_COPIES)) / 1e9)
    copy_gbps = sorted(rates)[len(rates) // 2]
    algbw = rows[0].algbw_gbps
    ratio = algbw / copy_gbps
    ok = COPY_RATIO_BAND[0] <= ratio <= COPY_RATIO_BAND[1]
    return _line(name, ok, f"all_gather 16 MiB algbw {algbw:.1f} GB/s vs graph-captured copy {copy_gbps:.1f} GB/s "
                           f"(ratio {ratio:.2f}, band {COPY_RATIO_BAND[0]}-{COPY_RATIO_BAND[1]})")


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


def _sub(sub, command: str, default_name: str, *positional: tuple[str, type]) -> argparse.ArgumentParser:
    parser = sub.add_parser(command)
    for name, kind in positional:
        parser.add_argument(name, type=kind)
    parser.add_argument("--name", default=default_name)
    parser.add_argument("--proves", default="", help="what a PASS of this step shows (appended to its line)")
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    folder, log, rc = ("run_dir", Path), ("log", Path), ("rc", int)
    run = _sub(sub, "run", "sweep", folder)
    run.add_argument("--status", default="complete")
    run.add_argument("--min-rows", type=int, default=1)
    run.add_argument("--ranks", type=int)
    _sub(sub, "limits", "limits", ("path", Path)).add_argument("--gpu", action="store_true")
    _sub(sub, "refused", "refused", log, rc).add_argument("--needle", required=True)
    _sub(sub, "torchrun-exit", "torchrun exit", log, rc).add_argument("--child", type=int, required=True)
    st = _sub(sub, "stall", "stall", folder, log, rc)
    st.add_argument("--timeout", type=float, required=True)
    st.add_argument("--rows", type=int, required=True)
    st.add_argument("--expect-rc", dest="rc_expected", type=int, help="default: the tool's code for a failed run")
    st.add_argument("--names", default="", help="text the error line must hold (the rank at fault)")
    st.add_argument("--slack", type=float, default=0.0, help="seconds more allowed (a roll call)")
    _sub(sub, "rank-lost", "rank lost", folder, log, rc).add_argument("--rank", type=int, default=1)
    _sub(sub, "doctor", "doctor", folder)
    _sub(sub, "meta-env", "meta_env", folder).add_argument("--nccl", action="store_true")
    _sub(sub, "calibration", "calibration_iters", folder)
    _sub(sub, "d2d-vs-all-gather", "all_gather 16 MiB scales like a copy", folder)
    _sub(sub, "nvml-dump", "nvml dump", ("path", Path))
    return parser


def main(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    _Said.proves = a.proves
    commands = {
        "run": lambda: check_run(a.run_dir, a.name, a.status, a.min_rows, a.ranks),
        "limits": lambda: limits(a.path, a.name, a.gpu),
        "refused": lambda: refused(a.log, a.rc, a.name, a.needle),
        "torchrun-exit": lambda: torchrun_exit(a.log, a.rc, a.name, a.child),
        "stall": lambda: stall(a.run_dir, a.log, a.rc, a.name, a.timeout, a.rows, a.rc_expected, a.names, a.slack),
        "rank-lost": lambda: rank_lost(a.run_dir, a.log, a.rc, a.name, a.rank),
        "doctor": lambda: doctor(a.run_dir, a.name),
        "meta-env": lambda: meta_env(a.run_dir, a.name, a.nccl),
        "calibration": lambda: calibration(a.run_dir, a.name),
        "d2d-vs-all-gather": lambda: d2d_vs_all_gather(a.run_dir, a.name),
        "nvml-dump": lambda: nvml_dump(a.path),
    }
    return commands[a.command]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
