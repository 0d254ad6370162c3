"""Baselines on disk: a run folder copied to <results-root>/baselines/NAME/, the known-good
reference `sweep --baseline` and `compare` read back."""

from __future__ import annotations

import errno
import re
import shutil
import uuid
from pathlib import Path

from nccl_bench.errors import OptionError, WriteFailedError
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.loader import read_run
from nccl_bench.results.run_folder import CLAIM_FILE
from nccl_bench.results.schema import ResultRow
from nccl_bench.sweep.sweep_config import option_name

BASELINES_DIR = "baselines"
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A folder name is at most 255 bytes (NAME_MAX) and saving uses `.NAME.XXXXXXXX.saving` beside the target.
MAX_NAME_CHARS = 200
# Replacing a baseline that other saves replace at the same moment: tries before giving up.
SAVE_TRIES = 3


def validate_baseline_name(name: str, option: str = "save_baseline") -> str:
    """A name is one folder: letters, digits, '.', '_' or '-', never a path, short enough to save."""
    if not _NAME_PATTERN.fullmatch(name) or name in (".", ".."):
        raise OptionError(option, f"{name!r} is not a baseline name; use letters, digits, '.', '_' or '-'")
    if len(name) > MAX_NAME_CHARS:
        raise OptionError(option, f"a baseline name is at most {MAX_NAME_CHARS} characters, got {len(name)}")
    return name


def baseline_dir(results_root: Path, name: str) -> Path:
    return Path(results_root) / BASELINES_DIR / validate_baseline_name(name)


def refuse_existing_baseline(results_root: Path, name: str) -> None:
    """A saved baseline is the known-good reference: replacing it takes its own option."""
    target = baseline_dir(results_root, name)
    if target.exists():
        raise OptionError("save_baseline", f"baseline {name!r} already exists at {target}; "
                          "pass {replace_baseline} to replace it", mentions=("replace_baseline",))


def prepare_baselines(
    baseline: Path | None, save_name: str | None, results_root: Path | None = None, replace: bool = False
) -> tuple[ResultRow, ...]:
    """Before a sweep measures: the rows of the baseline it will be compared with (none without one),
    and the name it will be saved under valid and, unless replacing, free."""
    rows: tuple[ResultRow, ...] = ()
    if baseline is not None:
        rows = read_run(baseline, option_name("baseline")).rows
    if save_name is not None:
        validate_baseline_name(save_name)
        if results_root is not None and not replace:
            refuse_existing_baseline(results_root, save_name)
    return rows


def save_baseline(run_dir: Path, name: str, results_root: Path, replace: bool = False) -> Path:
    """Copy a finished run folder to results_root/baselines/NAME/; an existing one only with replace.

    Replacing is how CI refreshes `main` on every merge, so it is allowed, but only when asked:
    a second run with the same name must not silently drop the known-good reference. The copy is
    made beside the target and renamed into place, so a crash never leaves half a baseline.
    """
    target = baseline_dir(results_root, name)
    if not replace:
        refuse_existing_baseline(results_root, name)
    run_dir = Path(run_dir)
    read_rows(run_dir, option_name("save_baseline"))  # refuse to store a run that has no readable results
    named = target
    if target.is_symlink():  # a baseline kept elsewhere and linked here: replaced where it lives
        target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _own_name(target, "saving")
    try:
        shutil.copytree(run_dir, staging, ignore=shutil.ignore_patterns(CLAIM_FILE))  # the run's, not the baseline's
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise WriteFailedError(staging, exc) from None
    for _ in range(SAVE_TRIES):
        old = _moved_aside(target) if replace else None
        try:
            staging.rename(target)  # atomic; fails on a baseline another save put there meanwhile
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                shutil.rmtree(staging, ignore_errors=True)
                raise WriteFailedError(target, exc) from None
            if not replace:
                shutil.rmtree(staging, ignore_errors=True)
                raise OptionError("save_baseline", f"baseline {name!r} was saved at {target} by another run "
                                  "while this one measured; pass {replace_baseline} to replace it",
                                  mentions=("replace_baseline",)) from None
            continue
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        return named
    shutil.rmtree(staging, ignore_errors=True)
    raise OptionError("save_baseline", f"baseline {name!r} at {target} kept being replaced by other runs")


def _moved_aside(target: Path) -> Path | None:
    """The baseline at `target` renamed to a name of this save's own (None if there is none now)."""
    old = _own_name(target, "old")
    try:
        target.rename(old)
    except FileNotFoundError:
        return None
    return old


def _own_name(target: Path, kind: str) -> Path:
    """A name beside the baseline that no other save uses: saves of one name started at once never
    share a staging folder."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.{kind}")
