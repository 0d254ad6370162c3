"""A run folder on disk: named and made before any measuring, its meta.json written and read back.

A run folder holds `results.csv` (results/csv_appender.py appends it) and `meta.json` (written at
start with status "running", rewritten whole at the end).
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any, Iterable

from nccl_bench.errors import UserInputError, WriteFailedError
from nccl_bench.results.whole_file import read_json_or_none, replace_whole, strict_json

RESULTS_CSV = "results.csv"
META_JSON = "meta.json"
DOCTOR_JSON = "doctor.json"  # a doctor run's verdicts, written by doctor/doctor_report.py, read by render/html.py
# Free space a run folder must have before measuring starts: meta.json (~2 KB), a plot (~60 KB) and
# about 3,000 rows of results.csv (~300 B each). A disk that fills later is still reported.
MIN_FREE_BYTES = 2**20


def utc_stamp(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ")


def new_run_dir(root: Path, ops: Iterable[str], now: _dt.datetime | None = None) -> Path:
    """results/<UTC timestamp>_<ops>/, never an existing folder (a suffix is added instead)."""
    ops = list(ops)
    label = "all" if len(ops) > 3 else "+".join(ops)
    base = Path(root) / f"{utc_stamp(now)}_{label}"
    candidate, suffix = base, 1
    while candidate.exists():
        suffix += 1
        candidate = base.with_name(f"{base.name}-{suffix}")
    return candidate


def prepare_run_dir(path: Path, option: str = "--out") -> Path:
    """Create the run folder up front so a bad path, or a disk without room, fails before any measuring."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UserInputError(option, f"{path} is a symbolic link to {os.readlink(path)}, which does not exist")
    if path.exists() and not path.is_dir():
        raise UserInputError(option, f"{path} is a file, not a folder")
    try:
        if path.exists() and any(path.iterdir()):
            raise UserInputError(option, f"{path} already exists and is not empty; a run never overwrites results")
        _check_room(path, option)
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserInputError(option, f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def _check_room(path: Path, option: str) -> None:
    """The disk the run folder will be on (its nearest existing folder's) has MIN_FREE_BYTES free."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        stat = os.statvfs(existing)
    except OSError:
        return
    free = stat.f_bavail * stat.f_frsize
    if free < MIN_FREE_BYTES:
        raise UserInputError(
            option, f"no space left on {path}: {free:,} bytes free, a run needs at least {MIN_FREE_BYTES:,}"
        )


def remove_if_empty(path: Path | None) -> None:
    """Remove a run folder that nothing was written to (a run that stopped before it began)."""
    if path is None:
        return
    try:
        Path(path).rmdir()  # only ever succeeds on an empty folder
    except OSError:
        pass


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    """meta.json rewritten whole (replace_whole), strict JSON; WriteFailedError when it cannot be written
    (the meta.json before stays as it was)."""
    path = Path(run_dir) / META_JSON
    text = strict_json(meta, indent=2, sort_keys=True, default=str)
    try:
        replace_whole(path, text + "\n")
    except OSError as exc:
        raise WriteFailedError(path, exc) from None


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    return read_json_or_none(Path(run_dir) / META_JSON)
