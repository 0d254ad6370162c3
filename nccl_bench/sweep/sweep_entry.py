"""The sweep as the CLI calls it: `plan_sweep` makes the job from the checked config and baseline options, and the
job refuses what the ranks would refuse before any starts, runs on this rank, and judges the finished run.

Every call the command makes into sweep/ is `plan_sweep` or a method of its SweepJob, so an option can be
followed from the command to where it acts. The plan, the body and torch load inside the methods that use
them; the CLI imports this module when a sweep runs, never for `--help`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from nccl_bench.comparison import Comparison
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, OptionError, RunFailedError
from nccl_bench.ranks.launch import is_local_worker
from nccl_bench.results.loader import read_run
from nccl_bench.results.run_folder import read_meta
from nccl_bench.sweep.baseline_check import (
    BaselineCheck,
    check_against_baseline,
    check_plan_against_baseline,
    plan_baseline_check,
    refuse_repeats,
)
from nccl_bench.sweep.busbw_floor import FloorCheck, check_floor
from nccl_bench.sweep.saved_baselines import prepare_baselines, save_baseline
from nccl_bench.sweep.sweep_config import BaselineOptions, SweepConfig, option_name
from nccl_bench.sweep.sweep_report import SweepObserver, SweepSummary
from nccl_bench.units.nccl_env import Variant, label, shell_loop, variants

if TYPE_CHECKING:
    from nccl_bench.sweep.plan import Plan


@dataclass(frozen=True)
class SweepJob:
    """A sweep as asked for, every option checked: the config, and what to do with a baseline after it."""

    config: SweepConfig
    baseline: BaselineCheck | None

    @property
    def variants(self) -> list[Variant]:
        """Each --nccl-env variant, run in fresh ranks one after the other ([()] without the option)."""
        return variants(self.config.nccl_env)

    def preflight(self, workers: int) -> tuple[str, list[str]]:
        """Without a launcher, before `workers` local ranks start: what they would refuse (backend, root, plan,
        memory, the baseline's world); the backend they will use and the notes to say."""
        from nccl_bench.sweep.plan import preflight

        plan = preflight(self.config, workers, workers)
        check_plan_against_baseline(self.baseline, workers, plan.backend, plan.keys(self.config),
                                    [label(v) for v in self.variants])
        return plan.backend, list(plan.before_start)

    def plan_on_ranks(self, launch) -> Plan:
        """Under a launcher, on every rank: the plan, checked against the baseline before anything is measured."""
        _refuse_variants_under_launcher(self.config, launch)
        import torch

        from nccl_bench.sweep.plan import plan_run

        plan = plan_run(self.config, launch.world_size, torch.__version__, launch.local_world_size)
        check_plan_against_baseline(self.baseline, launch.world_size, plan.backend, plan.keys(self.config),
                                    [label(v) for v in self.variants])
        return plan

    def run(self, plan: Plan, observer_factory: Callable[[int], SweepObserver],
            on_stuck: Callable[[RunFailedError], None]) -> SweepSummary:
        """Measure on this rank through the shared life cycle (sweep/sweep_body.py)."""
        from nccl_bench.sweep.sweep_body import execute

        return execute(self.config, observer_factory, on_stuck=on_stuck, plan=plan)

    def judge(self, run_dir: Path) -> SweepVerdicts:
        """The finished run's rows against the floor and the baseline that were asked for."""
        floor_gbps = self.config.min_busbw_gbps
        compared = self.baseline is not None and self.baseline.baseline is not None
        run = read_run(run_dir, "run") if floor_gbps is not None or compared else None
        return SweepVerdicts(check_floor(run.rows, floor_gbps) if floor_gbps is not None else None,
                             check_against_baseline(self.baseline, run) if compared else None)

    @staticmethod
    def verdict_on_disk(run_dir: Path) -> int:
        """What a completed run's meta.json says: EXIT_VERDICT when the data check counted wrong elements
        (local workers: the process that started them reads it, whichever worker ended how; a run that
        failed keeps its own code)."""
        meta = read_meta(run_dir) or {}
        return EXIT_VERDICT if meta.get("status") == "complete" and meta.get("wrong_total") else EXIT_OK

    def keep_baseline(self, run_dir: Path) -> Path:
        """--save-baseline NAME: the run folder copied to <results-root>/baselines/NAME/; where it is now."""
        return save_baseline(run_dir, self.baseline.save_name, self.config.results_root,
                             self.baseline.replace_baseline)


def plan_sweep(config: SweepConfig, options: BaselineOptions) -> SweepJob:
    """The checked config and baseline options -> the job: the baseline options checked against the config
    and each other, the baseline read and the name to save under free."""
    baseline = plan_baseline_check(options.baseline, options.tolerance, options.save_baseline,
                                   options.allow_mismatch, options.replace_baseline)
    refuse_repeats(config, baseline)
    if baseline is not None:
        baseline = baseline.with_rows(prepare_baselines(baseline.baseline, baseline.save_name, config.results_root,
                                                        baseline.replace_baseline))
    return SweepJob(config, baseline)


def _refuse_variants_under_launcher(config: SweepConfig, launch) -> None:
    """Each --nccl-env variant needs fresh ranks; a launcher's ranks cannot be restarted from inside."""
    if not config.nccl_env or is_local_worker():
        return
    loop = shell_loop(config.nccl_env, f"{launch.launcher} ... nccl-bench sweep ... (without {{nccl_env}})")
    raise OptionError("nccl_env", f"needs fresh ranks for each variant, and {launch.launcher} started these once; "
                      f"loop in the shell instead: {loop}", mentions=("nccl_env",))


@dataclass(frozen=True)
class SweepVerdicts:
    """The finished run judged: against --min-busbw, against --baseline (None: not asked)."""

    floor: FloorCheck | None
    comparison: Comparison | None

    @property
    def exit_code(self) -> int:
        """A negative verdict (1) before a comparison that judged nothing (2), either before success."""
        codes = {self.floor.exit_code if self.floor else EXIT_OK,
                 self.comparison.exit_code if self.comparison else EXIT_OK}
        return EXIT_VERDICT if EXIT_VERDICT in codes else max(codes)

    def why_not_saved(self) -> str | None:
        """Why --save-baseline keeps this run out (None: it may be saved): only a run that passed is a baseline."""
        if self.comparison is not None and self.comparison.failures:
            return "the run regressed"
        if self.comparison is not None and self.comparison.exit_code:
            return "the comparison with the baseline judged no row"
        if self.floor is not None and self.floor.exit_code:
            return f"the run is below {option_name('min_busbw_gbps')}"
        return None
