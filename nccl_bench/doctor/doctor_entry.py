"""The doctor as the CLI calls it: the job of a checked DoctorConfig refuses what local workers would
refuse, runs on this rank, and reads the verdict a run reached.

Every call the command makes into doctor/ is a method of its DoctorJob (placed as
sweep/sweep_entry.py's). The body and torch load inside the methods that use them; the CLI imports this
module when the doctor runs, never for `--help`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nccl_bench.doctor.doctor_config import DoctorConfig
from nccl_bench.doctor.doctor_report import DoctorObserver, DoctorReport
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, RunFailedError
from nccl_bench.results.run_folder import DOCTOR_JSON


@dataclass(frozen=True)
class DoctorJob:
    """The doctor as asked for, every option checked."""

    config: DoctorConfig

    def preflight(self, workers: int) -> tuple[str, list[str]]:
        """Without a launcher, before `workers` local ranks start: the backend and host memory refused
        first; the backend they will use (and no notes)."""
        from nccl_bench.doctor.doctor_body import preflight

        return preflight(self.config, workers), []

    def run(self, observer_factory: Callable[[int], DoctorObserver],
            on_stuck: Callable[[RunFailedError], None]) -> DoctorReport:
        """Measure and judge on this rank through the shared life cycle (doctor/doctor_body.py)."""
        from nccl_bench.doctor.doctor_body import execute

        return execute(self.config, observer_factory, on_stuck=on_stuck)

    @staticmethod
    def verdict_of(report: DoctorReport) -> int:
        """The run's verdict as an exit code, reached alike on every rank from the same gathered numbers
        (rank 0 alone exits with it: cli/on_ranks.carries_verdict)."""
        judged = report.judgement is not None and report.status in ("complete", "")
        return EXIT_VERDICT if judged and report.judgement.verdict != "healthy" else EXIT_OK

    @staticmethod
    def verdict_on_disk(run_dir: Path) -> int:
        """What a finished run's doctor.json says: EXIT_VERDICT when it names suspects or a contended fabric."""
        verdict_file = run_dir / DOCTOR_JSON
        found = json.loads(verdict_file.read_text()) if verdict_file.is_file() else {}
        # a run that ended early left the verdicts of what it measured: its failure, not them, is its exit
        negative = found.get("status", "complete") == "complete" and found.get("verdict") in ("suspects", "contended")
        return EXIT_VERDICT if negative else EXIT_OK

