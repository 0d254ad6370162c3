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
import math
import os
import stat
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator, NoReturn

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


def strict_json(document: Any, **options: Any) -> str:
    """JSON that every strict reader accepts: a non-finite number (inf, nan) is refused, naming where it is,
    instead of being written as the bare `Infinity` or `NaN` that standard JSON does not have."""
    try:
        return json.dumps(document, allow_nan=False, **options)
    except ValueError:
        where = _non_finite_at(document)
        raise ValueError(f"refusing to write non-standard JSON: {where} is not a finite number") from None


def _non_finite_at(value: Any, where: str = "$") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return where
    children: Any = ()
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, (list, tuple)):
        children = enumerate(value)
    for key, child in children:
        found = _non_finite_at(child, f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]")
        if found:
            return found
    return None


def replace_whole(path: Path, pieces: str | bytes | Iterable[str]) -> None:
    """Write `pieces` (text, or the bytes of a figure) so that `path` holds the old content or the new,
    never half of one: into a hidden file beside it (its name does not end as path's does, so a collector
    watching *.prom skips it), synced, then renamed over path. A path that exists and is no regular file
    (/dev/stdout, a pipe) is written directly. OSError as the system raised it; no temporary file is left."""
    path = Path(path)
    binary = isinstance(pieces, bytes)
    mode, encoding = ("wb", None) if binary else ("w", "utf-8")
    pieces = [pieces] if isinstance(pieces, (str, bytes)) else pieces
    if path.exists() and not path.is_file():
        with open(path, mode, encoding=encoding) as handle:
            handle.writelines(pieces)
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, mode, encoding=encoding) as handle:
            handle.writelines(pieces)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    """meta.json rewritten whole (replace_whole), strict JSON; WriteFailedError when it cannot be written
    (the meta.json before stays as it was)."""
    path = Path(run_dir) / META_JSON
    text = strict_json(meta, indent=2, sort_keys=True, default=str)
    try:
        replace_whole(path, text + "\n")
    except OSError as exc:
        raise WriteFailedError(path, exc) from None


def write_text_file(path: Path, pieces: str | bytes | Iterable[str]) -> None:
    """A file the user asked for (an export, a report, a plot's bytes): written whole (replace_whole), or
    WriteFailedError naming it."""
    try:
        replace_whole(path, pieces)
    except OSError as exc:
        raise_write_failed(path, exc)


def append_text(path: Path, text: str) -> None:
    """Text added at the end of a file that others write too (GitHub's step summary), never replacing
    theirs; OSError as the system raised it."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def raise_write_failed(path: Path, exc: OSError) -> NoReturn:
    """A file left half-written is removed (a device such as /dev/full is left alone); one line names it."""
    with contextlib.suppress(OSError):
        if Path(path).is_file():
            Path(path).unlink()
    raise WriteFailedError(path, exc) from None


def read_small_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most max_bytes; OSError names what else it is.

    Checked on the open file, so a FIFO (which would block until a writer comes), a device such as
    /dev/zero (endless) or a file larger than the cap is refused without reading it whole.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise OSError(0, "not a regular file")
        if status.st_size > max_bytes:
            raise OSError(0, f"{status.st_size:,} bytes, more than the {max_bytes:,} it may have")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(0, f"more than the {max_bytes:,} bytes it may have")
    return data


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
    """Read a results.csv (or its run folder) back into rows, checking the column contract (iter_rows)."""
    return list(iter_rows(path, option))


def iter_rows(path: Path, option: str = "RESULTS") -> Iterator[ResultRow]:
    """The rows of a results.csv (or its run folder) one by one, read as a stream: memory does not grow
    with the file. Every check of the column contract applies; an error is raised at the line at fault.

    A run that stopped before its first row (meta.json, no results.csv) has no rows, like a
    header-only results.csv. A last line cut off mid-write (a crash, a full disk) is left out with
    a ResultsWarning: every complete row before it is still read.
    """
    path = Path(path)
    if _run_without_rows(path):
        return
    csv_path = resolve_results_csv(path, option)
    try:
        handle = open(csv_path, newline="", encoding="utf-8-sig")  # -sig: a CSV saved by a spreadsheet
    except OSError as exc:
        raise UserInputError(option, f"cannot parse {csv_path}: {exc.strerror or exc}") from None
    with handle:
        lines = _csv_lines(handle, csv_path, option)
        header = _results_header(next(lines, None), csv_path, option)
        checked_versions: set[str] = set()
        complete = 0
        previous = next(lines, None)
        while previous is not None:
            current = next(lines, None)
            record = _complete_record(csv_path, header, previous, current is None, complete, option)
            if record is None:
                break
            version = record["schema_version"]
            if version not in checked_versions:
                why = unreadable_version(version)
                if why is not None:
                    raise UserInputError(option, f"{csv_path} has {why}")
                _check_columns(header, int(version), csv_path, option)
                checked_versions.add(version)
            try:
                yield record_to_row(record)
            except (TypeError, ValueError) as exc:
                raise UserInputError(option, f"{csv_path} line {previous[0]}: {exc}") from None
            complete += 1
            previous = current
        if not checked_versions:
            _check_columns(header, SCHEMA_VERSION, csv_path, option)


def _check_columns(header: list[str], version: int, csv_path: Path, option: str) -> None:
    missing = [c for c in required_columns(version) if c not in header]
    if missing:
        raise UserInputError(option, f"{csv_path} lacks columns: {', '.join(missing)}")


def _results_header(first: tuple[int, list[str]] | None, csv_path: Path, option: str) -> list[str]:
    """The header of a file that says it is a results CSV (a schema_version column)."""
    if first is None:
        raise UserInputError(option, f"{csv_path} is empty")
    header = first[1]
    if "schema_version" not in header:
        raise UserInputError(option, f"{csv_path} is not an nccl_bench results CSV (no schema_version column)")
    return header


def _complete_record(
    csv_path: Path, header: list[str], line: tuple[int, list[str]], last: bool, complete: int, option: str
) -> dict[str, str] | None:
    """Column -> cell of a complete line; None for a cut last line (left out with a warning)."""
    line_number, cells = line
    if cells == header:
        raise UserInputError(
            option, f"{csv_path} line {line_number} repeats the header line (files joined?); keep one header"
        )
    if len(cells) > len(header):
        raise UserInputError(
            option, f"cannot parse {csv_path}: line {line_number} has {len(cells)} fields, the header {len(header)}"
        )
    record = dict(zip(header, cells, strict=False))  # a short line is caught below
    if record.get("schema_version", "") == "":  # the last column: empty means the line was cut short
        if last:
            _warn_cut(csv_path, line_number, complete)
            return None
        raise UserInputError(option, f"{csv_path} line {line_number} is incomplete (cut off while being written?)")
    return record


def _warn_cut(csv_path: Path, line_number: int, complete: int) -> None:
    warnings.warn(
        f"{csv_path} line {line_number} is cut off (the run stopped while writing it); "
        f"read the {complete} complete row(s) before it",
        ResultsWarning,
        stacklevel=2,
    )


# No line of a results CSV or an nccl-tests log comes near this; a file with a longer one is not one,
# and reading it would hold the whole line (a multi-GB file without a newline) in memory.
MAX_LINE_CHARS = 1 << 20


def bounded_lines(handle, path: Path, option: str) -> Iterator[str]:
    """The lines of an open text file, each read with a bound: a longer line is refused, naming it."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE_CHARS)
        if not line:
            return
        number += 1
        if len(line) == MAX_LINE_CHARS and not line.endswith("\n"):
            raise UserInputError(option, f"{path} line {number} is longer than {MAX_LINE_CHARS:,} characters; "
                                         "not a results CSV or an nccl-tests log")
        yield line


def _csv_lines(handle, csv_path: Path, option: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, cells) of every non-blank line in ResultsWriter's dialect.

    Numbers count lines of the file, so a quoted newline in `flags` does not shift the line an error names.
    """
    reader = csv.reader(bounded_lines(handle, csv_path, option))
    end = 0
    try:
        for cells in reader:
            start, end = end + 1, reader.line_num
            if cells:
                yield start, cells
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserInputError(option, f"cannot parse {csv_path}: {str(exc).strip().splitlines()[0]}") from None


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

