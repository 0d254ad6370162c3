"""Start-up: `nccl-bench --help` and an argument error must answer in under 0.3 s.

    python benchmarks/startup.py [--runs 7]

Times, as a user would see it, the installed console script (next to this Python, not a pyenv
shim, which adds its own ~0.2 s of bash) for: `--help`, `sweep --help`, a bad value the CLI
rejects (`sweep --iters x`) and an unknown option (`sweep --bogus`); `python -c pass` is the
floor. Prints the median and minimum wall time and the median CPU time (user + sys, which a
loaded host inflates less than wall time), and whether torch, pandas, matplotlib or pydantic
were imported (`python -X importtime`): none of them may be on these paths.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 0.3
HEAVY = ("torch", "pandas", "matplotlib", "pydantic", "numpy")
CASES = (("--help",), ("sweep", "--help"), ("sweep", "--iters", "x"), ("sweep", "--bogus"))


def _time(command: list[str], runs: int) -> tuple[float, float, float, int]:
    walls, cpus, code = [], [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        code = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), min(walls), statistics.median(cpus), code


def heavy_imports(args: tuple[str, ...]) -> list[str]:
    """Top-level heavy packages imported on the way to answering `nccl-bench ARGS`."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "nccl_bench", *args],
                            capture_output=True, text=True)
    found = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            module = line.rsplit("|", 1)[1].strip()
            if module.split(".")[0] in HEAVY:
                found.add(module.split(".")[0])
    return sorted(found)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    script = Path(sys.executable).with_name("nccl-bench")
    if not script.exists():
        print(f"startup.py: no console script at {script}; pip install -e . first", file=sys.stderr)
        return 2
    import typer

    print(f"# startup: {script} (typer {typer.__version__}); {args.runs} runs each; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    floor = _time([sys.executable, "-c", "pass"], args.runs)
    print(f"{'command':<32}{'wall med s':>11}{'wall min s':>11}{'cpu med s':>10}{'exit':>5}  heavy imports / verdict")
    print(f"{'python -c pass':<32}{floor[0]:>11.3f}{floor[1]:>11.3f}{floor[2]:>10.3f}{floor[3]:>5}  (floor)")
    failed = 0
    for case in CASES:
        wall, fastest, cpu, code = _time([str(script), *case], args.runs)
        heavy = heavy_imports(case)
        ok = wall < BUDGET_S and not heavy
        failed = failed or (0 if ok else 1)
        print(f"{'nccl-bench ' + ' '.join(case):<32}{wall:>11.3f}{fastest:>11.3f}{cpu:>10.3f}{code:>5}  "
              f"{', '.join(heavy) or 'none'}; {'met' if ok else 'MISSED'} (< {BUDGET_S} s)")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
