"""The rank side as the CLI sees it: the layers below that the rank commands (sweep, doctor) call,
imported in this one place.

Imported on use (`from nccl_bench.cli import rank_side`), never at start-up: these modules bring
the rank side, which `--help` and argument errors must not pay for. The compare command reads
compare's own API where it runs.
"""

from __future__ import annotations

from nccl_bench import compare  # baselines: plan_baseline_check, check_plan_against_baseline, ...
from nccl_bench.doctor import run as doctor  # execute, preflight, DOCTOR_JSON, write_report_json, SilentObserver
from nccl_bench.ranks import (
    plan,  # the sweep's planning: Plan, plan_run, preflight
    sweep,  # execute, SilentObserver
)
from nccl_bench.ranks.faults import Interrupted, hold_signals, interrupts_unwrapped, signals_raise_interrupted
from nccl_bench.ranks.launch import LOCAL_WORKER_ENV, default_workers, run_local_workers, shared_cores_note
from nccl_bench.ranks.layout import detect_launch
from nccl_bench.results import baselines  # prepare_baselines, save_baseline
from nccl_bench.results.loader import read_run

__all__ = [
    "LOCAL_WORKER_ENV", "Interrupted", "baselines", "compare", "default_workers", "detect_launch", "doctor",
    "hold_signals", "interrupts_unwrapped", "plan", "read_run", "run_local_workers", "shared_cores_note",
    "signals_raise_interrupted", "sweep",
]
