"""The one loader that reads every input kind into ResultRows.

Inputs (`load_rows`): a run folder, a results.csv, an nccl_bench JSON export, an nccl-tests
text log or an nccl-tests `-J` JSON file, told apart by their content rather than their name. A
sweep's own printed output (a job's output file, with srun --label or mpirun --tag-output
prefixes or without) stands for the run folder its `# results:` line names.
"""

from __future__ import annotations

import itertools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from nccl_bench.errors import UserInputError
from nccl_bench.results.csv_reader import iter_rows, read_rows
from nccl_bench.results.input_lines import (
    GZIP_ERRORS,
    ResultsWarning,
    bounded_lines,
    damaged_gzip,
    decompressed,
    open_bytes,
    open_text,
)
from nccl_bench.results.run_folder import read_meta
from nccl_bench.results.schema import (
    ResultRow,
    RunRows,
    check_row,
    record_to_row,
    required_columns,
    unreadable_version,
)
from nccl_bench.results.whole_file import read_small_file

JSON_FORMAT_NAME = "nccl_bench.results"
# The first and the folder line of a sweep's printed header (render/tables.header_lines).
SWEEP_LOG_MARK = "# nccl_bench: backend "
RESULTS_LINE = "# results: "


@dataclass(frozen=True)
class LogHints:
    """What an nccl-tests log may not say itself (report/compare --op, --ranks)."""

    op: str | None = None
    ranks: int | None = None


def load_rows(
    path: Path, option: str = "RUN", unrecognised_as_csv: bool = False, hints: LogHints | None = None
) -> list[ResultRow]:
    """Rows from a run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.

    An input none of these recognises is reported as a log without result lines or, with
    unrecognised_as_csv (read_run), as a CSV lacking results.csv's columns.
    """
    rows = _load_rows(Path(path), option, unrecognised_as_csv, hints or LogHints())
    if not rows:  # the same answer for a header-only CSV and an empty run, however either is named
        raise UserInputError(option, f"{path} has no result rows{_status_of(Path(path))}")
    return rows


def stream_rows(path: Path, option: str = "RUN", hints: LogHints | None = None) -> Iterator[ResultRow]:
    """load_rows as a stream: a results CSV (or run folder) is read row by row as the caller takes them,
    so memory does not grow with the file; other inputs are read whole. An input without rows is refused
    here, before the caller has written anything; an error further on is raised at the row at fault."""
    path, hints = Path(path), hints or LogHints()
    kind = _input_kind(path, option)
    if kind == "csv":
        rows: Iterator[ResultRow] = iter_rows(path, option)
    elif kind == "log":
        rows = _log_rows(path, option, hints)
    else:
        rows = iter(_load_rows(path, option, False, hints))
    first = next(rows, None)
    if first is None and kind == "log":
        folder = _sweep_log_folder(path, option)  # a sweep's printed output stands for its run folder
        if folder is not None:
            return stream_rows(folder, option, hints)
    if first is None:
        if kind == "log":  # the log's own words on why it has no rows, as load_rows gives them
            load_rows(path, option, hints=hints)
        raise UserInputError(option, f"{path} has no result rows{_status_of(path)}")
    return itertools.chain([first], rows)


def _log_rows(path: Path, option: str, hints: LogHints) -> Iterator[ResultRow]:
    """An nccl-tests log's rows one table at a time, each checked; a failure after the rows is warned of."""
    from nccl_bench.results.nccltests_log import LogScan, iter_log

    scan, count = LogScan(), 0
    with open_text(path, encoding="utf-8", errors="replace") as handle:
        for row in iter_log(bounded_lines(handle, path, option), scan, str(path), option, hints.op, hints.ranks):
            count += 1
            yield _checked([row], path, option, count - 1)[0]
    if count and scan.failure is not None:
        message = f"{path}: the run failed after {count} row(s); the log says: {scan.failure}"
        warnings.warn(message, ResultsWarning, stacklevel=2)


def _input_kind(path: Path, option: str) -> str:
    """csv (a run folder or a results CSV), json or log, told from a file's first SNIFF_BYTES."""
    if path.is_dir() or not path.exists():
        return "csv"
    if not path.is_file():
        raise UserInputError(option, f"{path} is not a file or a results folder")
    try:
        with open_bytes(path) as handle:
            head = handle.read(SNIFF_BYTES).decode("utf-8", errors="replace")
    except GZIP_ERRORS as exc:
        raise damaged_gzip(path, option, exc) from None
    except OSError as exc:
        raise UserInputError(option, f"cannot read {path}: {exc.strerror or exc}") from None
    start = head.lstrip()
    if start.startswith("{"):
        return "json"
    return "csv" if "schema_version" in start.partition("\n")[0].rstrip("\r").split(",") else "log"


def read_run(path: Path, option: str, hints: LogHints | None = None) -> RunRows:
    """One side of `compare` or of `sweep --baseline`: any input kind, a foreign CSV explained as such."""
    return RunRows(Path(path), option, tuple(load_rows(path, option, unrecognised_as_csv=True, hints=hints)))


def _status_of(path: Path) -> str:
    meta = read_meta(path if path.is_dir() else path.parent)
    if not meta or not meta.get("status"):
        return ""
    return f" (meta.json: the run is {meta['status']})"


# What is read of a file to tell its kind; the rest of a CSV or a log is read as a stream.
SNIFF_BYTES = 64 * 1024
# A JSON document is parsed whole: larger than this, it is refused rather than taking the host's memory.
MAX_JSON_BYTES = 256 * 1024**2


def _load_rows(path: Path, option: str, unrecognised_as_csv: bool, hints: LogHints) -> list[ResultRow]:
    kind = _input_kind(path, option)
    if kind == "csv":
        return read_rows(path, option)
    if kind == "json":
        return _rows_from_json_file(path, option)
    from nccl_bench.results.nccltests_log import scan_log

    with open_text(path, encoding="utf-8", errors="replace") as handle:
        lines = bounded_lines(handle, path, option)
        scan = scan_log(lines, source=str(path), option=option, op=hints.op, ranks=hints.ranks)
    rows = _checked(scan.rows, path, option)
    if rows:
        if scan.failure is not None:  # the rows before a failure were measured; say what stopped the run
            message = f"{path}: the run failed after {len(rows)} row(s); the log says: {scan.failure}"
            warnings.warn(message, ResultsWarning, stacklevel=2)
        return rows
    failure = scan.failure or scan.nccl_warning
    if failure is not None:  # an nccl-tests run that failed before its first result line
        raise UserInputError(option, f"{path}: no result lines; the log says: {failure}")
    folder = _sweep_log_folder(path, option)
    if folder is not None:
        return read_rows(folder, option)
    if unrecognised_as_csv:
        return read_rows(path, option)  # its errors say what a results CSV lacks
    raise UserInputError(option, f"{path}: no nccl-tests result lines found")


def _rows_from_json_file(path: Path, option: str) -> list[ResultRow]:
    try:
        text = decompressed(read_small_file(path, MAX_JSON_BYTES), MAX_JSON_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise UserInputError(option, f"cannot read {path} as JSON: {exc.strerror or exc}") from None
    return _rows_from_json_text(text, path, option)


def _sweep_log_folder(path: Path, option: str) -> Path | None:
    """The run folder a sweep's printed output names: as written, else beside the log; None if not a sweep's.

    Read as a stream (scheduler prefixes taken off each line), like the log itself."""
    from nccl_bench.results.nccltests_log import unprefixed

    marked, named = False, []
    with open_text(path, encoding="utf-8", errors="replace") as handle:
        for raw in bounded_lines(handle, path, option):
            line = unprefixed(raw).strip()
            marked = marked or line.startswith(SWEEP_LOG_MARK)
            if line.startswith(RESULTS_LINE):
                named = [line.removeprefix(RESULTS_LINE).strip()]
    if not marked:
        return None
    if not named:
        raise UserInputError(option, f"{path}: an nccl_bench sweep's output that names no results folder")
    for folder in (Path(named[-1]), path.parent / named[-1]):
        if (folder / "results.csv").is_file():
            return folder
    raise UserInputError(option, f"{path}: an nccl_bench sweep's output; its results folder {named[-1]} is not "
                                 f"there or beside the file (copy the folder, or report it directly)")


def _rows_from_json_text(text: str, path: Path, option: str) -> list[ResultRow]:
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys)
    except _KeyTwice as exc:
        raise UserInputError(option, f"{path}: {exc}") from None
    except ValueError as exc:
        raise UserInputError(option, f"{path} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise UserInputError(option, f"{path}: expected a JSON object")
    if document.get("format") == JSON_FORMAT_NAME:
        return rows_from_json(document, str(path), option)
    if "results" in document:
        from nccl_bench.results.nccltests_json import parse_json

        return _checked(parse_json(document, source=str(path), option=option), path, option)
    raise UserInputError(option, f"{path} is neither an nccl_bench JSON export nor nccl-tests -J output")


class _KeyTwice(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique: json.loads alone keeps the last copy of a key without a word."""
    document = dict(pairs)
    if len(document) < len(pairs):
        twice = sorted({key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1})
        raise _KeyTwice(f"the key {', '.join(map(repr, twice))} appears more than once in one object; "
                        "which copy holds the value cannot be told")
    return document


def _checked(rows: list[ResultRow], path: Path, option: str, first_index: int = 0) -> list[ResultRow]:
    """Rows parsed from another tool's file, held to what a results row may contain (schema.check_row)."""
    for index, row in enumerate(rows, start=first_index):
        try:
            check_row(row)
        except ValueError as exc:
            raise UserInputError(option, f"{path} result {index + 1}: {exc}") from None
    return rows


def rows_from_json(document: dict[str, Any], source: str, option: str) -> list[ResultRow]:
    version = document.get("schema_version")
    why = unreadable_version(version)
    if why is not None:
        raise UserInputError(option, f"{source} has {why}")
    required = required_columns(version)
    records = document.get("rows")
    if not isinstance(records, list):
        raise UserInputError(option, f"{source} has no 'rows' list")
    rows = []
    for index, record in enumerate(records):
        missing = [c for c in required if c not in record] if isinstance(record, dict) else list(required)
        if missing:
            raise UserInputError(option, f"{source} row {index} lacks columns: {', '.join(missing)}")
        try:
            rows.append(record_to_row(record))
        except (TypeError, ValueError) as exc:
            raise UserInputError(option, f"{source} row {index}: {exc}") from None
    return rows


def run_label(path: Path) -> str:
    """A short name for a run in titles and legends: the folder name, or the file's stem."""
    path = Path(path)
    if path.is_dir():
        return path.resolve().name
    if path.name == "results.csv":
        return path.resolve().parent.name
    return path.stem


def load_runs(
    paths: list[Path], option: str = "RUN", hints: LogHints | None = None
) -> list[tuple[str, list[ResultRow]]]:
    """(label, rows) per input, labels made unique so legends can tell the runs apart."""
    return [(label, load_rows(path, option, hints=hints)) for path, label in zip(paths, run_labels(paths), strict=True)]


def run_labels(paths: list[Path]) -> list[str]:
    """run_label per input, a repeated one numbered: `run`, `run (2)`."""
    labels: list[str] = []
    seen: dict[str, int] = {}
    for path in paths:
        label = run_label(path)
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return labels
