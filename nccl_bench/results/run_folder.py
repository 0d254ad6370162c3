"""A run folder on disk: named and made before any measuring, its meta.json written and read back.

A run folder holds `results.csv` (results/csv_appender.py appends it), `meta.json` (written at
start with status "running", rewritten whole at the end) and `.claim`, which says which run the folder
belongs to (claim_run_dir).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import socket
from pathlib import Path
from typing import Any, Iterable

from nccl_bench.errors import UserInputError, WriteFailedError
from nccl_bench.results.whole_file import read_json_or_none, replace_whole, strict_json

RESULTS_CSV = "results.csv"
META_JSON = "meta.json"
CLAIM_FILE = ".claim"  # the claimant's token: whose run folder this is
DOCTOR_JSON = "doctor.json"  # a doctor run's verdicts, written by doctor/doctor_report.py, read by render/html.py
# Free space a run folder must have before measuring starts: meta.json (~2 KB), a plot (~60 KB) and
# about 3,000 rows of results.csv (~300 B each). A disk that fills later is still reported.
MIN_FREE_BYTES = 2**20


def utc_stamp(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ")


def new_run_dir(root: Path, ops: Iterable[str], now: _dt.datetime | None = None) -> Path:
    """results/<UTC timestamp>_<ops>/: the name a default run folder starts from (claim_run_dir
    numbers it -2, -3, ... when another run took it first)."""
    ops = list(ops)
    label = "all" if len(ops) > 3 else "+".join(ops)
    return Path(root) / f"{utc_stamp(now)}_{label}"


def claim_run_dir(path: Path, option: str, claimant: str, numbered: bool = False) -> Path:
    """Make the run folder, or take an empty one, for this run alone; the folder it got.

    Checked up front, so a bad path or a disk without room fails before any measuring. The claim is
    atomic: a CLAIM_FILE made with O_EXCL (and, for a numbered default name, os.mkdir of the name),
    so of runs started at once on one folder exactly one gets it, and nothing of two runs is mixed.
    A folder already claimed by `claimant` is this run's own (the ranks of a run whose launcher-less
    CLI claimed it; a restarted attempt of an elastic job), and is given back as it is.
    numbered: `path` is a default name; one taken gets -2, -3, ... instead of a refusal.
    """
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UserInputError(option, f"{path} is a symbolic link to {os.readlink(path)}, which does not exist")
    if path.exists() and not path.is_dir():
        raise UserInputError(option, f"{path} is a file, not a folder")
    try:
        _check_room(path, option)
        if numbered:
            path = _make_numbered(path)
        else:
            path.mkdir(parents=True, exist_ok=True)
        _claim(path, option, claimant)
    except OSError as exc:
        raise UserInputError(option, f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def _make_numbered(base: Path) -> Path:
    """os.mkdir of base, base-2, base-3, ...: the first name no other run has made is this run's."""
    base.parent.mkdir(parents=True, exist_ok=True)
    for number in itertools.count(1):
        candidate = base if number == 1 else base.with_name(f"{base.name}-{number}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def _claim(path: Path, option: str, claimant: str) -> None:
    claim = path / CLAIM_FILE
    try:
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        holder = claim_holder(path)
        if holder == claimant:
            return
        if _holds_results(path):
            raise UserInputError(option, f"{path} already exists and is not empty; a run never overwrites results"
                                 ) from None
        raise UserInputError(option, f"{path} is taken by another run ({holder or 'unknown'}); give each run its own "
                             "folder") from None
    try:
        os.write(fd, claimant.encode("utf-8"))
    finally:
        os.close(fd)
    if _holds_results(path):  # a folder with someone's files, claimed by none: never written into
        claim.unlink()
        raise UserInputError(option, f"{path} already exists and is not empty; a run never overwrites results")


def _holds_results(path: Path) -> bool:
    return any(entry.name != CLAIM_FILE for entry in path.iterdir())


def claim_holder(path: Path) -> str | None:
    """Who claimed the run folder (claim_run_dir's claimant); None for a folder nobody claimed."""
    try:
        return (Path(path) / CLAIM_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def find_claimed(root: Path, claimant: str) -> Path | None:
    """The newest folder under `root` that `claimant` claimed (a restarted attempt finds its run's)."""
    try:
        found = [entry for entry in Path(root).iterdir() if entry.is_dir() and claim_holder(entry) == claimant]
    except OSError:
        return None
    return max(found, key=lambda entry: entry.stat().st_mtime, default=None)


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


def release_run_dir(path: Path | None, made: bool) -> None:
    """A run that stopped before it began gives its folder back: the claim removed where nothing else
    was written, and the folder too where this run made it."""
    if path is None:
        return
    path = Path(path)
    try:
        if _holds_results(path):
            return
        (path / CLAIM_FILE).unlink(missing_ok=True)
        if made:
            path.rmdir()  # only ever succeeds on an empty folder
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


def never_finished(path: Path) -> str | None:
    """What to say of a run folder whose meta.json says "running" though the process that wrote it is
    gone (rank 0 killed: SIGKILL, the OOM killer, a lost node); None for any other folder or file.

    Told by meta.json's pid and host, on this host only (another host's processes cannot be seen from
    here), and only of a process that is this tool (a pid is reused).
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    meta = read_meta(folder)
    if not meta or meta.get("status") != "running":
        return None
    pid, host = meta.get("pid"), meta.get("host")
    if not isinstance(pid, int) or host != socket.gethostname() or _is_ours(pid):
        return None
    return (f"{folder} never finished: its meta.json says running, but its process (pid {pid} on {host}) is gone; "
            "its rows are those recorded before it ended")


def _is_ours(pid: int) -> bool:
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:  # there, but not ours to look at: taken as alive
        return True
    return b"nccl_bench" in command_line or b"nccl-bench" in command_line
