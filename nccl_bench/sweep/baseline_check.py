"""`sweep --baseline/--tolerance/--save-baseline`: the options checked against each other before
measuring, the plan checked against the baseline's rows before measuring, and the finished run
compared with the baseline by the verdict engine (comparison.py). Pure: rows and options in.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from nccl_bench.comparison import (
    DEFAULT_TOLERANCE,
    Comparison,
    backends,
    compare_runs,
    joined,
    world_sizes,
)
from nccl_bench.errors import OptionError
from nccl_bench.results.schema import ResultRow, RunRows
from nccl_bench.sweep.sweep_config import SweepConfig, option_name
from nccl_bench.units.nccl_env import variants


@dataclass(frozen=True)
class BaselineCheck:
    """What `sweep --baseline/--tolerance/--save-baseline` asks for once the run is done."""

    baseline: Path | None
    tolerance: float
    save_name: str | None
    allow_mismatch: bool = False
    replace_baseline: bool = False
    baseline_rows: tuple[ResultRow, ...] = field(default=(), compare=False)  # read once, up front

    def with_rows(self, rows: Iterable[ResultRow]) -> BaselineCheck:
        """The check with the baseline's rows, as sweep/saved_baselines.prepare_baselines read them."""
        return dataclasses.replace(self, baseline_rows=tuple(rows))


def plan_baseline_check(
    baseline: Path | None, tolerance: float | None, save_name: str | None,
    allow_mismatch: bool = False, replace_baseline: bool = False,
) -> BaselineCheck | None:
    """The sweep's baseline options checked against each other before measuring, so a typo fails at
    once, not after the run; sweep/saved_baselines.prepare_baselines then reads the files they name."""
    needs = ((tolerance is not None, "tolerance", "baseline", baseline),
             (allow_mismatch, "allow_mismatch", "baseline", baseline),
             (replace_baseline, "replace_baseline", "save_baseline", save_name))
    for given, key, needed, needed_value in needs:
        if given and needed_value is None:
            raise OptionError(key, f"only applies with {{{needed}}}", mentions=(needed,))
    if baseline is None and save_name is None:
        return None
    fraction = DEFAULT_TOLERANCE if tolerance is None else tolerance
    return BaselineCheck(
        None if baseline is None else Path(baseline), fraction, save_name, allow_mismatch, replace_baseline
    )


def refuse_repeats(config: SweepConfig, check: BaselineCheck | None) -> None:
    """A comparison matches one row per point; a run of several cycles, groups or variants has many."""
    repeats = [key for key, given in (("cycles", config.cycles != 1), ("split", config.split is not None),
                                      ("nccl_env", len(variants(config.nccl_env)) > 1)) if given]
    if check is not None and check.baseline is not None and repeats:
        verb = "give" if len(repeats) > 1 else "gives"
        named = " and ".join(f"{{{key}}}" for key in repeats)
        raise OptionError("baseline", f"compares one row per point; {named} {verb} several "
                          "(read the run's rows with nccl-bench report instead)", mentions=tuple(repeats))


def check_plan_against_baseline(
    check: BaselineCheck | None, world_size: int, backend: str, planned_keys: Iterable[tuple],
    planned_variants: Iterable[str] = ("",),
) -> None:
    """Before measuring: refuse a sweep that the baseline check would reject after it.

    planned_keys are (op, size_bytes, dtype, redop, placement) of every planned point; world size,
    backend and variants (--nccl-env's labels, "" without it) are what the run will have. The same
    rules as compare_rows, minus the numbers.
    """
    if check is None or not check.baseline_rows:
        return
    baseline = check.baseline_rows
    for what, theirs, ours in (
        ("world size", world_sizes(baseline), frozenset({world_size})),
        ("backend", backends(baseline), frozenset({backend})),
    ):
        if theirs != ours and not check.allow_mismatch:
            raise OptionError(
                "baseline",
                f"{what} differs: the baseline has {joined(theirs)}, this sweep would run with {joined(ours)}; "
                "pass {allow_mismatch} to compare anyway", mentions=("allow_mismatch",), value=str(check.baseline),
            )
    theirs = {(r.op, r.size_bytes, r.dtype, r.redop, r.placement) for r in baseline}
    if not theirs & set(planned_keys):
        raise OptionError(
            "baseline",
            "shares no (op, size, dtype, redop, placement) with this sweep's plan; "
            "measure the baseline's ops and sizes (see `nccl-bench report` of it)", value=str(check.baseline),
        )
    theirs_variants, ours_variants = {r.variant for r in baseline}, set(planned_variants)
    if not theirs_variants & ours_variants:
        def settings(labels: set[str]) -> str:
            return " or ".join(sorted(label or "no {nccl_env}" for label in labels))

        raise OptionError(
            "baseline",
            f"was measured with {settings(theirs_variants)}, this sweep would run with {settings(ours_variants)}; "
            "rows compare only under the same settings: give the baseline's {nccl_env}", mentions=("nccl_env",),
            value=str(check.baseline),
        )


def check_against_baseline(check: BaselineCheck, run: RunRows) -> Comparison:
    """What `sweep --baseline` runs after a sweep: the finished run against the baseline read before it."""
    baseline = RunRows(check.baseline, option_name("baseline"), check.baseline_rows)
    return compare_runs(baseline, run, tolerance=check.tolerance, allow_mismatch=check.allow_mismatch)
