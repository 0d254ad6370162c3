"""The rank side as the CLI sees it: the layers below that the rank commands (sweep, doctor) call,
imported in this one place.

Imported on use (`from nccl_bench.cli import rank_side`), never at start-up: these modules bring
the rank side, which `--help` and argument errors must not pay for. The compare command reads
compare's own API where it runs.
"""

from __future__ import annotations

from nccl_bench import comparison  # parse_tolerance
from nccl_bench.doctor import (
    doctor_body,  # execute, preflight
    doctor_report,  # report_json, write_report_json, SilentObserver
)
from nccl_bench.ranks.faults import Interrupted, hold_signals, interrupts_unwrapped, signals_raise_interrupted
from nccl_bench.ranks.launch import (
    LOCAL_WORKER_ENV,
    VARIANT_ENV,
    default_workers,
    run_local_workers,
    shared_cores_note,
)
from nccl_bench.ranks.layout import detect_launch
from nccl_bench.ranks.preflight import check_process_limits, exhausted_resource_text
from nccl_bench.ranks.run_owner import new_claimant
from nccl_bench.results.loader import read_run
from nccl_bench.sweep import (
    baseline_check,  # plan_baseline_check, check_plan_against_baseline, check_against_baseline, SWEEP_BASELINE_*
    busbw_floor,  # check_floor, floor_row_text
    plan,  # the sweep's planning: Plan, plan_run, preflight
    saved_baselines,  # prepare_baselines, save_baseline
    sweep_body,  # execute
    sweep_report,  # SilentObserver
)

__all__ = [
    "LOCAL_WORKER_ENV", "VARIANT_ENV", "Interrupted", "baseline_check", "busbw_floor", "check_process_limits",
    "comparison", "default_workers", "detect_launch", "doctor_body", "doctor_report", "exhausted_resource_text",
    "hold_signals", "interrupts_unwrapped", "new_claimant", "plan", "read_run", "run_local_workers",
    "saved_baselines", "shared_cores_note", "signals_raise_interrupted", "sweep_body",
    "sweep_report",
]
