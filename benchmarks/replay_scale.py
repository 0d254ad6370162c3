"""Time and peak RSS of profiling a large profiler trace: one rank's Kineto trace of 10^6 events, read
as a stream (nccl_bench/replay/) and grouped into the job's communication profile.

Run it plainly; it generates its traces in a temporary folder (or --keep DIR) and profiles each in a
fresh process, reading that process's own peak RSS (wait4's ru_maxrss) and its wall time:

    python benchmarks/replay_scale.py                    # 10^6 events, both formats
    python benchmarks/replay_scale.py --events 200000

Two traces, each gzip-compressed as the profiler writes them: `modern`, whose collectives are
record_param_comms with arguments and whose kernels carry their External id (one pass); `older`, whose
collectives are nccl:* annotations and whose kernels name only their correlation (a second pass reads
the launches). Each training "step" of the generated job is EVENTS_PER_STEP events: one collective
(its c10d op, record_param_comms, annotation, launch and NCCL kernel) and compute around it (matmuls
on the CPU and their kernels), so a tenth of the events belong to collectives, and 10^6 events hold
10^5 collectives over four sizes. Every kernel names its CUDA stream, as Kineto's do, so the reader's
activity scan (communication beside compute) holds 2 x 10^5 kernels and their launches; two profiler
steps make it look up each kernel's launch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENTS_PER_STEP = 10
SIZES_ELEMENTS = (1 << 10, 1 << 16, 1 << 20, 1 << 24)
# Target: memory holds the collectives (10^5 small records at 10^6 events) and one chunk of text,
# never the events; 512 MiB is far below the 1 GB+ the events' dicts would take when held.
MAX_RSS_MIB = 512

_PROFILE = """
import sys, time
from nccl_bench.replay.trace_reader import read_trace
from nccl_bench.replay.profile import profile_traces
start = time.perf_counter()
profile = profile_traces([read_trace(sys.argv[1])])
print(time.perf_counter() - start, sum(row.count for row in profile.rows), len(profile.rows))
"""


def _step_events(step: int, older: bool) -> list[dict]:
    """One step's events: a collective with its launch and kernel, and compute around it."""
    start = step * 1000.0
    elements = SIZES_ELEMENTS[step % len(SIZES_ELEMENTS)]
    comm_id, launch_id, compute_id = 3 * step, 3 * step + 1, 3 * step + 2
    correlation, compute_correlation = 2 * step, 2 * step + 1
    annotation_args = {"External id": launch_id, "Input Dims": [[elements]], "Input type": ["float"]}
    record_args = {"External id": comm_id} if older else {
        "External id": comm_id, "Collective name": "allreduce", "In msg nelems": elements,
        "Out msg nelems": elements, "dtype": "Float", "Group size": 8,
        "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "In split size": "[]",
        "Out split size": "[]", "Process Group Name": "0"}
    kernel_external_id = correlation if older else comm_id
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": start, "dur": 90.0,
         "args": {"External id": compute_id, "Input Dims": [[512, 512], [512, 512]], "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": start + 10, "dur": 5.0,
         "args": {"External id": compute_id, "correlation": compute_correlation}},
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n", "pid": 0, "tid": 7,
         "ts": start + 20, "dur": 300.0,
         "args": {"External id": compute_id, "correlation": compute_correlation, "stream": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": start + 100, "dur": 20.0,
         "args": {"External id": compute_id + 10**9}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": start + 200, "dur": 80.0,
         "args": {"External id": comm_id + 2 * 10**9}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": start + 205, "dur": 70.0,
         "args": record_args},
        {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": start + 210,
         "dur": 60.0, "args": annotation_args},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": start + 230,
         "dur": 8.0, "args": {"External id": comm_id, "correlation": correlation}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)",
         "pid": 0, "tid": 20, "ts": start + 400, "dur": 150.0 + elements / 1e4,
         "args": {"External id": kernel_external_id, "correlation": correlation, "stream": 20}},
        {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1736): _call_impl", "pid": 1,
         "tid": 1, "ts": start + 500, "dur": 400.0, "args": {"Python id": step}},
    ]


def _profiler_steps(steps: int) -> list[dict]:
    """Two profiler steps, each over half the job's steps: the window's figure leaves out what the last one
    launched, so every kernel's launch is looked up (replay/overlap.py)."""
    half = steps // 2 * 1000.0
    return [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": n * half,
             "dur": half, "args": {"External id": 3 * 10**9 + n}} for n in range(2)]


def write_trace(path: Path, events: int, older: bool) -> None:
    """A gzip-compressed trace of `events` events (rounded down to whole steps, and two profiler steps),
    written as it is made."""
    header = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8,
                                                      "nccl_version": "2.21.5"}}
    steps = events // EVENTS_PER_STEP
    with gzip.open(path, "wt", compresslevel=1, encoding="utf-8") as out:
        out.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
        for step in range(steps):
            lines = ",\n".join(json.dumps(event) for event in _step_events(step, older))
            out.write(("" if step == 0 else ",\n") + lines)
        out.write("".join(",\n" + json.dumps(event) for event in _profiler_steps(steps)))
        out.write('\n], "traceName": "replay_scale"}\n')


def profile_in_fresh_process(path: Path) -> tuple[float, float, str]:
    """(wall seconds of read + profile, peak RSS in MiB of the whole process, its output line)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "-c", _PROFILE, str(path)], stdout=subprocess.PIPE, text=True,
                               env=env)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"profiling {path} failed")
    seconds = float(output.split()[0])
    return seconds, usage.ru_maxrss / 1024, output.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the traces here and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="replay-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"# replay_scale: {args.events:,} events per trace; load average {os.getloadavg()}")
    failed = False
    for name, older in (("modern", False), ("older", True)):
        path = folder / f"{name}.json.gz"
        started = time.perf_counter()
        write_trace(path, args.events, older)
        made = time.perf_counter() - started
        seconds, rss_mib, output = profile_in_fresh_process(path)
        _, collectives, rows = output.split()
        verdict = "met" if rss_mib <= MAX_RSS_MIB else "MISSED"
        failed |= verdict != "met"
        print(f"{name:7s} {path.stat().st_size / 2**20:7.1f} MiB gz (made in {made:.0f} s): "
              f"read + profile {seconds:.1f} s, peak RSS {rss_mib:.0f} MiB (target <= {MAX_RSS_MIB}: {verdict}); "
              f"{int(collectives):,} collectives in {rows} rows")
        if args.keep is None:
            path.unlink()
    print(f"# load average after {os.getloadavg()}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
