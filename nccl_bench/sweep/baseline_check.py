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
from nccl_bench.errors import UserInputError
from nccl_bench.options import ALLOW_MISMATCH, BASELINE, REPLACE_BASELINE, SAVE_BASELINE, SWEEP_OPTION, TOLERANCE
from nccl_bench.results.schema import ResultRow, RunRows
from nccl_bench.sweep.sweep_config import SweepConfig
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
    baseline: Path | None, tolerance: str | None, save_name: str | None,
    allow_mismatch: bool = False, replace_baseline: bool = False,
) -> BaselineCheck | None:
    """The sweep's baseline options checked against each other before measuring, so a typo fails at
    once, not after the run; sweep/saved_baselines.prepare_baselines then reads the files they name."""
    needs = ((tolerance is not None, TOLERANCE, BASELINE, baseline),
             (allow_mismatch, ALLOW_MISMATCH, BASELINE, baseline),
             (replace_baseline, REPLACE_BASELINE, SAVE_BASELINE, save_name))
    for given, option, needed, needed_value in needs:
        if given and needed_value is None:
            raise UserInputError(option.name, f"only applies with {needed.name}")
    if baseline is None and save_name is None:
        return None
    fraction = DEFAULT_TOLERANCE if tolerance is None else TOLERANCE.read(tolerance)
    return BaselineCheck(
        None if baseline is None else Path(baseline), fraction, save_name, allow_mismatch, replace_baseline
    )


def refuse_repeats(config: SweepConfig, check: BaselineCheck | None) -> None:
    """A comparison matches one row per point; a run of several cycles, groups or variants has many."""
    repeats = [SWEEP_OPTION[key].name for key, given in (("cycles", config.cycles != 1),
                                                         ("split", config.split is not None),
                                                         ("nccl_env", len(variants(config.nccl_env)) > 1))
               if given]
    if check is not None and check.baseline is not None and repeats:
        verb = "give" if len(repeats) > 1 else "gives"
        raise UserInputError(BASELINE.name, f"compares one row per point; {' and '.join(repeats)} {verb} several "
                             "(read the run's rows with nccl-bench report instead)")


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
    label = f"{BASELINE.name} {check.baseline}"
    baseline = check.baseline_rows
    for what, theirs, ours in (
        ("world size", world_sizes(baseline), frozenset({world_size})),
        ("backend", backends(baseline), frozenset({backend})),
    ):
        if theirs != ours and not check.allow_mismatch:
            raise UserInputError(
                label,
                f"{what} differs: the baseline has {joined(theirs)}, this sweep would run with {joined(ours)}; "
                "pass --allow-mismatch to compare anyway",
            )
    theirs = {(r.op, r.size_bytes, r.dtype, r.redop, r.placement) for r in baseline}
    if not theirs & set(planned_keys):
        raise UserInputError(
            label,
            "shares no (op, size, dtype, redop, placement) with this sweep's plan; "
            "measure the baseline's ops and sizes (see `nccl-bench report` of it)",
        )
    theirs_variants, ours_variants = {r.variant for r in baseline}, set(planned_variants)
    if not theirs_variants & ours_variants:
        def settings(labels: set[str]) -> str:
            return " or ".join(sorted(label or "no --nccl-env" for label in labels))

        raise UserInputError(
            label,
            f"was measured with {settings(theirs_variants)}, this sweep would run with {settings(ours_variants)}; "
            "rows compare only under the same settings: give the baseline's --nccl-env",
        )


def check_against_baseline(check: BaselineCheck, run: RunRows) -> Comparison:
    """What `sweep --baseline` runs after a sweep: the finished run against the baseline read before it."""
    baseline = RunRows(check.baseline, BASELINE.name, check.baseline_rows)
    return compare_runs(baseline, run, tolerance=check.tolerance, allow_mismatch=check.allow_mismatch)
