"""Peak RSS per rank of a real sweep against torch's own baseline plus 2.2 x the largest buffer set.

Run it plainly (it starts its own torchrun launches):

    python benchmarks/memory.py --op all_reduce --size 256M --nproc 2

Two launches of N ranks each, gloo on CPU here (NCCL on GPU elsewhere, where RSS is host memory
only): first torch's own baseline, in which each rank imports torch, sets up the process group,
runs one 1 KiB all_reduce and tears the group down; then the real `nccl-bench sweep` on the one
op and size, run through the CLI entry in the worker process. Each rank reports its peak RSS
(ru_maxrss, which never goes down, so it is the peak of the whole process). The budget
is baseline + 2.2 x the op's buffer set, where the buffer set is what nccl-tests allocates for
the op: send + receive buffers, or one buffer for in-place-only ops (torch's all_reduce, broadcast).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_FACTOR = 2.2  # the budget: peak <= baseline + 2.2 x largest buffer set
MIB = 1024**2
REPORT_ENV = "NCCL_BENCH_MEMORY_REPORT"  # worker mode: the folder each rank writes its figure to


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _report(folder: Path, code: int) -> None:
    rank = os.environ.get("RANK", "0")
    record = {"rank": int(rank), "peak_rss_bytes": _peak_rss_bytes(), "exit": code}
    (folder / f"rank{rank}.json").write_text(json.dumps(record))


def worker(mode: str, sweep_args: list[str]) -> int:
    """Runs inside torchrun: the baseline, or the real sweep; then records this rank's peak RSS."""
    import torch
    import torch.distributed as tdist

    from nccl_bench import cli
    from nccl_bench.ranks import dist, preflight
    from nccl_bench.ranks.layout import detect_launch
    from nccl_bench.ranks.set_up import SetUp

    folder = Path(os.environ[REPORT_ENV])
    code = 0
    if mode == "baseline":
        launch = detect_launch()
        backend = preflight.chosen_backend("auto")
        with dist.process_group(launch, backend, 300, set_up=SetUp()) as ctx:
            tensor = torch.ones(256, device=ctx.device)
            tdist.all_reduce(tensor)
            tdist.barrier()
    else:
        sys.argv = ["nccl-bench", *sweep_args]
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    _report(folder, code)
    return code


def buffer_set_bytes(op: str, size_bytes: int, world_size: int, element_bytes: int = 4) -> int:
    """Bytes of the buffers one rank of nccl-tests needs for op at size (out-of-place when torch has it)."""
    from nccl_bench.results.schema import PLACEMENT_OUT
    from nccl_bench.units.op_table import OPS, buffer_elems

    collective = OPS[op]
    send, recv = buffer_elems(collective, size_bytes, element_bytes, world_size)
    if PLACEMENT_OUT in collective.placements:
        return (send + recv) * element_bytes
    return max(send, recv) * element_bytes


def _launch(nproc: int, mode: str, sweep_args: list[str], folder: Path) -> tuple[list[dict], str, float]:
    folder.mkdir(parents=True)
    env = dict(os.environ, **{REPORT_ENV: str(folder)})
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               __file__, "--worker", mode, "--", *sweep_args]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    figures = sorted((json.loads(p.read_text()) for p in folder.glob("rank*.json")), key=lambda f: f["rank"])
    if len(figures) != nproc:
        sys.stderr.write(result.stderr[-3000:])
        raise SystemExit(f"memory.py: the {mode} launch failed (exit {result.returncode})")
    return figures, result.stdout, elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="all_reduce")
    parser.add_argument("--size", default="256M")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--iters", default="3", help="timed ops per sample (memory does not depend on it)")
    parser.add_argument("--worker", choices=("baseline", "sweep"), help=argparse.SUPPRESS)
    parser.add_argument("sweep_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.sweep_args)

    from nccl_bench.units.sizes import parse_size

    scratch = Path(tempfile.mkdtemp(prefix="nccl_bench_memory_"))
    sweep_args = ["sweep", "--op", args.op, "--sizes", args.size, "--iters", args.iters, "-w", "1",
                  "--out", str(scratch / "run")]
    baseline, _, _ = _launch(args.nproc, "baseline", [], scratch / "baseline")
    peaks, table, elapsed = _launch(args.nproc, "sweep", sweep_args, scratch / "sweep")
    buffers = buffer_set_bytes(args.op, parse_size(args.size, "--size"), args.nproc)
    budget = BUDGET_FACTOR * buffers
    print(table.rstrip())
    print(f"# memory: nccl-bench {' '.join(sweep_args[:-2])} on {args.nproc} ranks ({elapsed:.1f} s); "
          f"buffer set {buffers / MIB:,.0f} MiB per rank; budget = baseline + {BUDGET_FACTOR} x buffer set")
    print(f"{'rank':>4} {'baseline MiB':>13} {'peak MiB':>9} {'over MiB':>9} {'budget MiB':>11} "
          f"{'over/buffers':>13}  verdict")
    failed = 0
    for base, peak in zip(baseline, peaks, strict=False):
        over = peak["peak_rss_bytes"] - base["peak_rss_bytes"]
        ok = over <= budget and peak["exit"] == 0
        failed = failed or (0 if ok else 1)
        verdict = "within budget" if ok else ("OVER BUDGET" if peak["exit"] == 0 else f"sweep exit {peak['exit']}")
        print(f"{peak['rank']:>4} {base['peak_rss_bytes'] / MIB:>13,.0f} {peak['peak_rss_bytes'] / MIB:>9,.0f} "
              f"{over / MIB:>9,.0f} {(base['peak_rss_bytes'] + budget) / MIB:>11,.0f} "
              f"{over / buffers:>13.2f}  {verdict}")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
