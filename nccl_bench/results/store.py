"""A run folder on disk: crash-safe writing of results.csv and meta.json, and reading them back.

A run folder holds `results.csv` (one row per op x size x placement, appended and fsynced as
each point finishes, so a crash loses nothing already measured) and `meta.json` (written at
start with status "running", rewritten at the end).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any, Iterable, NoReturn

from nccl_bench.errors import UserInputError, WriteFailedError
from nccl_bench.results.schema import (
    _FLOAT_COLUMNS,
    _INT_COLUMNS,
    _OPTIONAL_INT_COLUMNS,
    COLUMNS,
    SCHEMA_VERSION,
    ResultRow,
    csv_cells,
    record_to_row,
    required_columns,
    row_to_record,
    unreadable_version,
)

RESULTS_CSV = "results.csv"


class ResultsWarning(UserWarning):
    """Something about a results file the reader worked around (a cut last line): data for the
    caller, which decides how to show it (the CLI prints one line to stderr)."""


META_JSON = "meta.json"
# Free space a run folder must have before measuring starts: meta.json (~2 KB), a plot (~60 KB) and
# about 3,000 rows of results.csv (~300 B each). A disk that fills later is still reported.
MIN_FREE_BYTES = 2**20


class CsvAppender:
    """Appends lines to a CSV, fsynced per line: a crash keeps every finished line, and a line that
    cannot be written whole (a full disk) is cut back off, so the file stays readable."""

    def __init__(self, path: Path, columns: Iterable[str]):
        self.path = Path(path)
        self._columns = list(columns)
        try:
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise WriteFailedError(self.path, exc) from None
        self._needs_header = os.fstat(self._fd).st_size == 0

    def append_cells(self, cells: Iterable[Any]) -> None:
        # The csv module, not pandas: importing pandas cost ~0.5 s inside every sweep.
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        if self._needs_header:
            writer.writerow(self._columns)
        writer.writerow(cells)
        data = memoryview(text.getvalue().encode("utf-8"))
        size = os.fstat(self._fd).st_size
        try:
            while data:
                data = data[os.write(self._fd, data):]
            os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
                if size == 0:  # not even the header: a run without rows has no results.csv
                    self.path.unlink()
            raise WriteFailedError(self.path, exc) from None
        self._needs_header = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ResultsWriter(CsvAppender):
    """results.csv of a sweep: one ResultRow per line, in the column contract's order."""

    def __init__(self, run_dir: Path):
        super().__init__(Path(run_dir) / RESULTS_CSV, COLUMNS)

    def append(self, row: ResultRow) -> None:
        self.append_cells(csv_cells(row))


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    """Atomic rewrite (temp file + rename) so meta.json is never half-written; WriteFailedError when
    it cannot be written."""
    path = Path(run_dir) / META_JSON
    tmp = path.with_suffix(".json.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(meta, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()  # the meta.json before stays as it was
        raise WriteFailedError(path, exc) from None


def write_text_file(path: Path, text: str) -> None:
    """A file the user asked for (an export, a report): written whole, or removed again and
    WriteFailedError naming it."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise_write_failed(path, exc)


def raise_write_failed(path: Path, exc: OSError) -> NoReturn:
    """A file left half-written is removed (a device such as /dev/full is left alone); one line names it."""
    with contextlib.suppress(OSError):
        if Path(path).is_file():
            Path(path).unlink()
    raise WriteFailedError(path, exc) from None


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


def resolve_results_csv(path: Path, option: str) -> Path:
    """Accept a run folder or a results.csv; name the option when neither is there."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.is_file():
        raise UserInputError(option, f"no results found at {path}")
    return path


def _run_without_rows(path: Path) -> bool:
    """A run folder (or its results.csv named) whose meta.json exists but no row was written yet."""
    folder = path if path.is_dir() else path.parent if path.name == RESULTS_CSV else None
    return folder is not None and not (folder / RESULTS_CSV).exists() and (folder / META_JSON).is_file()


def read_rows(path: Path, option: str = "RESULTS") -> list[ResultRow]:
    """Read a results.csv (or its run folder) back into rows, checking the column contract.

    A run that stopped before its first row (meta.json, no results.csv) has no rows, like a
    header-only results.csv. A last line cut off mid-write (a crash, a full disk) is left out with
    a ResultsWarning: every complete row before it is still read.
    """
    path = Path(path)
    if _run_without_rows(path):
        return []
    csv_path = resolve_results_csv(path, option)
    header, lines = _read_results_csv(csv_path, option)
    records = _complete_records(csv_path, header, lines, option)
    versions = {record["schema_version"] for _, record in records}
    for version in sorted(versions):
        why = unreadable_version(version)
        if why is not None:
            raise UserInputError(option, f"{csv_path} has {why}")
    oldest = min((int(v) for v in versions), default=SCHEMA_VERSION)
    missing = [c for c in required_columns(oldest) if c not in header]
    if missing:
        raise UserInputError(option, f"{csv_path} lacks columns: {', '.join(missing)}")
    rows = []
    for line_number, record in records:
        try:
            rows.append(record_to_row(record))
        except (TypeError, ValueError) as exc:
            raise UserInputError(option, f"{csv_path} line {line_number}: {exc}") from None
    return rows


def _read_results_csv(csv_path: Path, option: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the lines of a file that says it is a results CSV (a schema_version column)."""
    try:
        header, lines = _read_csv(csv_path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserInputError(option, f"cannot parse {csv_path}: {str(exc).strip().splitlines()[0]}") from None
    if header is None:
        raise UserInputError(option, f"{csv_path} is empty")
    if "schema_version" not in header:
        raise UserInputError(option, f"{csv_path} is not an nccl_bench results CSV (no schema_version column)")
    return header, lines


def _complete_records(
    csv_path: Path, header: list[str], lines: list[tuple[int, list[str]]], option: str
) -> list[tuple[int, dict[str, str]]]:
    """(line number, column -> cell) of every complete line; a cut last line is left out with a warning."""
    records = []
    for index, (line_number, cells) in enumerate(lines):
        if len(cells) > len(header):
            raise UserInputError(
                option, f"cannot parse {csv_path}: line {line_number} has {len(cells)} fields, the header {len(header)}"
            )
        record = dict(zip(header, cells, strict=False))  # a short line is caught below
        if record.get("schema_version", "") == "":  # the last column: empty means the line was cut short
            if index == len(lines) - 1:
                _warn_cut(csv_path, line_number, len(records))
                break
            raise UserInputError(option, f"{csv_path} line {line_number} is incomplete (cut off while being written?)")
        records.append((line_number, record))
    return records


def _warn_cut(csv_path: Path, line_number: int, complete: int) -> None:
    warnings.warn(
        f"{csv_path} line {line_number} is cut off (the run stopped while writing it); "
        f"read the {complete} complete row(s) before it",
        ResultsWarning,
        stacklevel=4,  # the caller of read_rows
    )


def _read_csv(csv_path: Path) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    """(header, or None when there is none; [(first line number, cells)]) in ResultsWriter's dialect.

    Blank lines are skipped; numbers count lines of the file, so a quoted newline in `flags`
    does not shift the line an error names.
    """
    header: list[str] | None = None
    lines: list[tuple[int, list[str]]] = []
    with open(csv_path, newline="", encoding="utf-8-sig") as handle:  # -sig: a CSV saved by a spreadsheet
        reader = csv.reader(handle)
        end = 0
        for cells in reader:
            start, end = end + 1, reader.line_num
            if not cells:
                continue
            if header is None:
                header = cells
            else:
                lines.append((start, cells))
    return header, lines


def rows_to_frame(rows: Iterable[ResultRow]):
    """A pandas DataFrame in the column contract's order and types, for analysis in notebooks.

    Whole-number columns are int64, the ones that may be missing (wrong, slowest_rank) pandas'
    nullable Int64, measured values float64 with NaN for "does not exist". pandas is imported
    here only: the sweep itself never needs it.
    """
    import pandas as pd

    frame = pd.DataFrame([row_to_record(row) for row in rows], columns=list(COLUMNS))
    types = {name: "int64" for name in _INT_COLUMNS}
    types.update({name: "Int64" for name in _OPTIONAL_INT_COLUMNS})
    types.update({name: "float64" for name in _FLOAT_COLUMNS})
    return frame.astype(types)


def load_frame(path: Path, option: str = "RESULTS"):
    """read_rows (with all its checks) as a typed pandas DataFrame."""
    return rows_to_frame(read_rows(path, option))


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / META_JSON
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None

