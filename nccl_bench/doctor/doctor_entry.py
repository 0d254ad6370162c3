"""The doctor as the CLI calls it: its config from the command line's values, what local workers would
refuse, the run on this rank, and the verdict a finished run left on disk.

Every call the command makes into doctor/ is one of these functions (placed as sweep/sweep_entry.py's).
Cheap to import: torch loads inside the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from nccl_bench.doctor import doctor_body
from nccl_bench.doctor.doctor_config import DoctorConfig, build_config
from nccl_bench.doctor.doctor_report import DoctorObserver, DoctorReport
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, RunFailedError
from nccl_bench.results.run_folder import DOCTOR_JSON


def plan_doctor(given: Mapping[str, Any]) -> DoctorConfig:
    """The command line's values -> DoctorConfig, each checked by its declared option."""
    return build_config(**given)


def preflight(config: DoctorConfig, workers: int) -> tuple[str, list[str]]:
    """Without a launcher, before `workers` local ranks start: the backend and host memory refused
    first; the backend they will use (and no notes)."""
    return doctor_body.preflight(config, workers), []


def run_doctor(config: DoctorConfig, observer_factory: Callable[[int], DoctorObserver],
               on_stuck: Callable[[RunFailedError], None]) -> DoctorReport:
    """Measure and judge on this rank through the shared life cycle (doctor/doctor_body.py)."""
    return doctor_body.execute(config, observer_factory, on_stuck=on_stuck)


def verdict_of(report: DoctorReport) -> int:
    """Every rank's exit: the verdict was reached from the same gathered numbers."""
    return EXIT_VERDICT if report.judgement is not None and report.judgement.suspects else EXIT_OK


def verdict_on_disk(run_dir: Path) -> int:
    """What a finished run's doctor.json says: EXIT_VERDICT when it names suspects."""
    verdict_file = run_dir / DOCTOR_JSON
    suspects = verdict_file.is_file() and json.loads(verdict_file.read_text())["verdict"] == "suspects"
    return EXIT_VERDICT if suspects else EXIT_OK
