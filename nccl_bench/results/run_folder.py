"""A run folder on disk: named and made before any measuring, its meta.json written and read back.

A run folder holds `results.csv` (results/csv_appender.py appends it), `meta.json` (written at
start with status "running", rewritten whole at the end) and `.claim`, which says which run the folder
belongs to (claim_run_dir): the run's token, then the process that claimed it (pid, its start time in
clock ticks since boot, the boot, the host), so a claim whose process is gone can be told from one
whose run goes on.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import itertools
import os
import re
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from nccl_bench.errors import OptionError, WriteFailedError
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
    numbered: `path` is a default name; one taken gets -2, -3, ... instead of a refusal. option: the option
    that named the folder, by its key (cli/ writes its flag) or as a flag.
    """
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise OptionError(option, f"{path} is a symbolic link to {os.readlink(path)}, which does not exist")
    if path.exists() and not path.is_dir():
        raise OptionError(option, f"{path} is a file, not a folder")
    try:
        _check_room(path, option)
        if numbered:
            path = _make_numbered(path)
        else:
            path.mkdir(parents=True, exist_ok=True)
        _claim(path, option, claimant)
    except OSError as exc:
        raise OptionError(option, f"cannot write to {path}: {exc.strerror or exc}") from None
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
            raise OptionError(option, f"{path} already exists and is not empty; a run never overwrites results"
                                 ) from None
        if not _take_over(path, option, claimant):
            raise OptionError(option, _taken(path)) from None
        return
    _write_claim(fd, claimant)
    if _holds_results(path):  # a folder with someone's files, claimed by none: never written into
        claim.unlink()
        raise OptionError(option, f"{path} already exists and is not empty; a run never overwrites results")


def _write_claim(fd: int, claimant: str) -> None:
    pid = os.getpid()
    owner = f"{_OWNER} pid={pid} start={process_start(pid)} boot={_boot_id()} host={socket.gethostname()}"
    try:
        os.write(fd, f"{claimant}\n{owner}\n".encode("utf-8"))
    finally:
        os.close(fd)


def _take_over(path: Path, option: str, claimant: str) -> bool:
    """Take a claim whose process is gone (this host, pid dead or now another program's), with a note;
    False for one that may still be in use. Under a lock on the folder, so of runs that find the same
    stale claim one takes it and the others see its new claim."""
    folder = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        owner = _claim_owner(path)
        why = None if owner is None else owner.gone()
        if why is None:
            return False
        (path / CLAIM_FILE).unlink()
        try:
            fd = os.open(path / CLAIM_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # a run that did not look first took it meanwhile: it is that run's
            return False
        _write_claim(fd, claimant)
    finally:
        os.close(folder)
    warnings.warn(f"{path} was claimed by a run that is gone ({why}); this run takes it", ClaimWarning, stacklevel=3)
    return True


class ClaimWarning(UserWarning):
    """A run folder taken over from a run that is gone."""


def _taken(path: Path) -> str:
    """The refusal of a folder another run holds: whose claim, and how to free it if that run is gone."""
    owner = _claim_owner(path)
    holder = claim_holder(path) or "unknown"
    if owner is None:
        check = "check that no run writes there"
    elif not owner.here():
        check = f"check with `ps -p {owner.pid}` on {owner.host}"
    else:
        check = f"pid {owner.pid} is still running here"
    return (f"{path} is taken by another run ({holder}); give each run its own folder, or if that run is gone, "
            f"remove {path / CLAIM_FILE} ({check})")


_OWNER = "owner"
_OWNER_LINE = re.compile(r"owner pid=(\d+) start=(\d*) boot=(\S*) host=(\S+)")
_TOKEN_PID = re.compile(r"pid (\d+) on ([^\s,]+)")  # a claim written before the owner line: its token's pid


@dataclass(frozen=True)
class _Owner:
    """The process that claimed a run folder; start and boot None where the claim does not say."""

    pid: int
    host: str
    start: int | None = None
    boot: str | None = None

    def here(self) -> bool:
        return same_host(self.host, socket.gethostname())

    def gone(self) -> str | None:
        """Why the process is certainly gone (on this host only); None while it may be alive."""
        if not self.here():
            return None
        if self.boot and self.boot != _boot_id():
            return f"pid {self.pid} on {self.host} ran before this host restarted"
        started = process_start(self.pid)
        if started is None:
            return f"pid {self.pid} on {self.host} is dead"
        if self.start is not None and started != self.start:
            return f"pid {self.pid} on {self.host} is now another program"
        if self.start is None and not _is_ours(self.pid):
            return f"pid {self.pid} on {self.host} is now another program"
        return None


def _claim_owner(path: Path) -> _Owner | None:
    try:
        text = (Path(path) / CLAIM_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _OWNER_LINE.search(text)
    if found:
        pid, start, boot, host = found.groups()
        return _Owner(int(pid), host, int(start) if start else None, boot or None)
    token = _TOKEN_PID.search(text)
    return _Owner(int(token.group(1)), token.group(2)) if token else None


def same_host(a: str, b: str) -> bool:
    """Host names as DNS compares them: case, and a trailing dot, make no difference."""
    return a.lower().rstrip(".") == b.lower().rstrip(".")


def process_start(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22); None when no such
    process is alive (a zombie counts as gone), or where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # from field 3 on: the name in field 2 may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _holds_results(path: Path) -> bool:
    return any(entry.name != CLAIM_FILE for entry in path.iterdir())


def claim_holder(path: Path) -> str | None:
    """Who claimed the run folder (claim_run_dir's claimant: the claim's first line); None for a folder
    nobody claimed."""
    try:
        text = (Path(path) / CLAIM_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    return lines[0].strip() if lines else ""


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
        raise OptionError(
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
    """What to say of a run folder whose meta.json says "running": its process is gone (rank 0 killed:
    SIGKILL, the OOM killer, a lost node; or its pid now another program's), still running, or on a host
    this one cannot see; its rows are partial in every case. None for any other folder or file."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    meta = read_meta(folder)
    if not meta or meta.get("status") != "running":
        return None
    pid, host = meta.get("pid"), meta.get("host")
    partial = "its rows are those recorded so far"
    if not isinstance(pid, int) or not isinstance(host, str):
        return f"{folder} is unfinished: its meta.json says running and not which process writes it; {partial}"
    if not same_host(host, socket.gethostname()):
        return (f"{folder} is unfinished: its meta.json says running (pid {pid} on {host}, which cannot be seen "
                f"from here); {partial}")
    if process_start(pid) is not None and _is_ours(pid):
        return f"{folder} is still running (pid {pid} on {host}); {partial}"
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
