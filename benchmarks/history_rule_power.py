"""The history rule's false alarms and detection power on simulated series (history/rule.py, pure):
log-normal runs whose between-run spread is `--between` and whose trials show `--within`, then one run
`--drop` lower. Prints, for each number of earlier runs, the share of unchanged runs flagged (per
judged run) and the share of drops flagged at their first run. docs/history.md quotes its figures.

    python benchmarks/history_rule_power.py [--series 4000] [--between 0.01] [--within 0.01] [--drop 0.15]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nccl_bench.history import rule  # noqa: E402

EARLIER_RUNS = (3, 4, 6, 10, 20)


def _series(rng: random.Random, runs: int, between: float, within: float) -> list[rule.Point]:
    return [rule.Point(f"r{i}", f"2026-01-01T00:{i:02d}", rng.lognormvariate(0, between), within)
            for i in range(runs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=4000)
    parser.add_argument("--between", type=float, default=0.01, help="log sigma of whole runs")
    parser.add_argument("--within", type=float, default=0.01, help="each run's own spread (log sigma)")
    parser.add_argument("--drop", type=float, default=0.15)
    parser.add_argument("--floor", type=float, default=0.03)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    rng = random.Random(options.seed)
    print(f"# between {options.between:.1%}, within {options.within:.1%}, drop {options.drop:.0%}, floor "
          f"{options.floor:.0%}, window {options.window}, {options.series} series per line")
    print("earlier runs  false alarms per judged run  drop flagged at its first run")
    for earlier in EARLIER_RUNS:
        alarms = judged = caught = 0
        for _ in range(options.series):
            points = _series(rng, earlier + 1, options.between, options.within)
            verdicts = rule.walk(points, options.window, options.floor)
            judged += sum(v.judged for v in verdicts)
            alarms += sum(v.status == rule.REGRESSION for v in verdicts)
            last = points[-1]
            dropped = rule.Point(last.run_id, last.started_utc, last.busbw_gbps * (1 - options.drop), last.noise)
            caught += rule.judge([*points[:-1], dropped], options.window, options.floor).status == rule.REGRESSION
        print(f"{earlier:12d}  {alarms / max(1, judged):26.4%}  {caught / options.series:29.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
