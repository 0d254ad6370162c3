"""End-to-end fidelity: the whole `torchrun -m nccl_bench sweep`, as a user runs it, against a minimal loop.

    python benchmarks/fidelity_e2e.py --rounds 11

Each round launches two separate torchrun jobs on 2 ranks (gloo on CPU):

  nccl_bench  torchrun --standalone --nproc_per_node 2 -m nccl_bench sweep --op all_reduce
              --sizes 1M,16M,64M --out DIR   (default options: check on, --iters auto), its
              busbw read from DIR/results.csv;
  reference   torchrun --standalone --nproc_per_node 2 benchmarks/reference_loop.py: plain
              torch.distributed, barrier, perf_counter, N all_reduces, max over ranks.

The two alternate (odd rounds nccl_bench first, even rounds the reference first), so drift and
any first-or-second effect hit both alike. A size's verdict is the median over rounds of the
per-round busbw ratio nccl_bench / reference; the target is 0.95..1.05 at every size.
`--tty` gives the sweep a pseudo-terminal (rank 0 then draws its progress bar, as on a
user's screen); without it the sweep's output goes to a file, as in a batch job.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOLERANCE = 0.05
MIN_ROUNDS = 11  # a verdict needs at least this many interleaved rounds
RUN_TIMEOUT_S = 600


def torchrun(nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]


def run_logged(command: list[str], log: Path, tty: bool, env: dict[str, str]) -> None:
    """Run to completion, output to `log` (through a pseudo-terminal with tty=True)."""
    with log.open("wb") as sink:
        if not tty:
            result = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=RUN_TIMEOUT_S,
                                    check=False)
            code = result.returncode
        else:
            import pty

            master, slave = pty.openpty()
            process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
            os.close(slave)
            while True:  # drain the terminal as a user's would, or the ranks block on a full buffer
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the slave side has exited
                    break
                if not chunk:
                    break
                sink.write(chunk)
            os.close(master)
            code = process.wait(timeout=RUN_TIMEOUT_S)
    if code != 0:
        sys.stderr.write(log.read_text(errors="replace")[-3000:])
        raise SystemExit(f"fidelity_e2e.py: {shlex.join(command)} failed (exit {code})")


def tool_points(run_dir: Path) -> dict[int, dict[str, float]]:
    with (run_dir / "results.csv").open(newline="") as handle:
        return {int(row["size_bytes"]): {"busbw_gbps": float(row["busbw_gbps"]), "iters": int(row["iters"]),
                                         "sample_ms": int(row["iters"]) * float(row["time_us"]) / 1e3}
                for row in csv.DictReader(handle) if row["op"] == "all_reduce" and row["busbw_gbps"]}


def reference_points(path: Path) -> dict[int, dict[str, float]]:
    points = json.loads(path.read_text())["points"].items()
    return {int(size): point | {"sample_ms": point["iters"] * point["time_us"] / 1e3} for size, point in points}


def median_interval(values: list[float], level: float = 0.90, draws: int = 4000) -> tuple[float, float]:
    """Bootstrap interval of the median (fixed seed, so a rerun of the rendering is identical)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    tail = int(draws * (1 - level) / 2)
    return medians[tail], medians[draws - 1 - tail]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--sizes", default="1M,16M,64M")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--min-sample-ms", type=float, default=None,
                        help="given to both jobs (default: each one's own, 200 ms on CPU)")
    parser.add_argument("--nice", type=int, default=0,
                        help="run both jobs at this niceness (e.g. -10, as root): other users' processes "
                             "then take fewer cycles from the ranks; both jobs alike")
    parser.add_argument("--tool-args", default="", help="extra sweep options, e.g. '--no-check'")
    parser.add_argument("--ref-args", default="", help="extra reference_loop.py options, e.g. '--fill pattern'")
    parser.add_argument("--tty", action="store_true", help="run the sweep on a pseudo-terminal (progress bar on)")
    parser.add_argument("--json", type=Path, default=None, help="also write every round's numbers here")
    parser.add_argument("--keep", type=Path, default=None, help="keep run folders and logs here (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="fidelity_e2e_"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)  # both jobs get what torchrun itself gives them
    sample = [] if args.min_sample_ms is None else ["--min-sample-ms", f"{args.min_sample_ms:g}"]
    nice = [] if args.nice == 0 else ["nice", "-n", str(args.nice)]
    tool_cmd = nice + torchrun(args.nproc) + ["-m", "nccl_bench", "sweep", "--op", "all_reduce", "--sizes", args.sizes,
                                       *sample, *shlex.split(args.tool_args)]
    ref_cmd = nice + torchrun(args.nproc) + [str(HERE / "reference_loop.py"), "--sizes", args.sizes, *sample,
                                             *shlex.split(args.ref_args)]
    load_before = os.getloadavg()
    print(f"# fidelity_e2e: {args.rounds} rounds, sizes {args.sizes}, {args.nproc} ranks; load average before "
          f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}", flush=True)
    print(f"# nccl_bench: {shlex.join(tool_cmd)} --out DIR{' (on a pty)' if args.tty else ''}", flush=True)
    print(f"# reference:  {shlex.join(ref_cmd)} --out FILE", flush=True)
    rounds = []
    started = time.perf_counter()
    for index in range(args.rounds):
        run_dir, ref_out = work / f"sweep_{index}", work / f"ref_{index}.json"
        jobs = [(tool_cmd + ["--out", str(run_dir)], work / f"sweep_{index}.log", args.tty),
                (ref_cmd + ["--out", str(ref_out)], work / f"ref_{index}.log", False)]
        for command, log, tty in jobs if index % 2 == 0 else reversed(jobs):
            run_logged(command, log, tty, env)
        tool, ref = tool_points(run_dir), reference_points(ref_out)
        rounds.append({"tool_first": index % 2 == 0, "loadavg": os.getloadavg()[0],
                       "tool": tool, "reference": ref})
        ratios = "  ".join(f"{size >> 20}M {_ratio(rounds[-1], size):.3f}" for size in sorted(ref))
        print(f"# round {index + 1}/{args.rounds} ({time.perf_counter() - started:.0f} s, load "
              f"{rounds[-1]['loadavg']:.2f}): nccl_bench/reference busbw {ratios}", flush=True)
    load_after = os.getloadavg()
    lines, met = render(rounds, args.rounds)
    print("\n".join(lines))
    print(f"# load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json), "keep": str(args.keep)},
                                         "loadavg_before": load_before, "loadavg_after": load_after,
                                         "rounds": rounds}, indent=1))
    return 0 if met else 1


def _ratio(one_round: dict, size: int) -> float:
    return one_round["tool"][size]["busbw_gbps"] / one_round["reference"][size]["busbw_gbps"]


def render(rounds: list[dict], count: int) -> tuple[list[str], bool]:
    """Per size: medians over rounds, the median per-round ratio, its spread and bootstrap interval."""
    sizes = sorted(rounds[0]["reference"])
    lines = ["# busbw in GB/s and sample length in ms are medians over rounds; nb/ref is the median of the",
             ("# per-round busbw ratios nccl_bench/reference, [min..max] their range, "
              "90% CI a bootstrap of that median"),
             (f"{'size':>6}{'ref GB/s':>10}{'nb GB/s':>9}{'ref ms':>8}{'nb ms':>7}{'nb/ref':>8}{'[min..max]':>14}"
              f"{'90% CI':>14}  target")]
    met = count >= MIN_ROUNDS
    for size in sizes:
        ratios = [_ratio(r, size) for r in rounds]
        ratio = statistics.median(ratios)
        low, high = median_interval(ratios)
        ok = abs(ratio - 1) <= TOLERANCE
        met = met and ok
        verdict = "met" if ok else "MISSED"

        def med(side: str, key: str, size: int = size) -> float:
            return statistics.median(r[side][size][key] for r in rounds)

        lines.append(f"{size >> 20:>5}M{med('reference', 'busbw_gbps'):>10.3f}{med('tool', 'busbw_gbps'):>9.3f}"
                     f"{med('reference', 'sample_ms'):>8.0f}{med('tool', 'sample_ms'):>7.0f}{ratio:>8.3f}"
                     f"{f'[{min(ratios):.2f}..{max(ratios):.2f}]':>14}{f'{low:.3f}..{high:.3f}':>14}"
                     f"  busbw ratio +-{TOLERANCE:.0%}: {verdict}")
    if count < MIN_ROUNDS:
        lines.append(f"# verdict: none (fewer than {MIN_ROUNDS} rounds)")
    else:
        lines.append(f"# verdict: {'every size meets the target' if met else 'some size MISSED the target'}")
    return lines, met


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
