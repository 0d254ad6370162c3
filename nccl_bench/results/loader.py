"""The one loader that reads every input kind into ResultRows.

Inputs (`load_rows`): a run folder, a results.csv, an nccl_bench JSON export, an nccl-tests
text log or an nccl-tests `-J` JSON file, told apart by their content rather than their name.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_bench.errors import UserInputError
from nccl_bench.results.schema import (
    ResultRow,
    RunRows,
    record_to_row,
    required_columns,
    unreadable_version,
)
from nccl_bench.results.store import ResultsWarning, read_meta, read_rows

JSON_FORMAT_NAME = "nccl_bench.results"


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


def read_run(path: Path, option: str, hints: LogHints | None = None) -> RunRows:
    """One side of `compare` or of `sweep --baseline`: any input kind, a foreign CSV explained as such."""
    return RunRows(Path(path), option, tuple(load_rows(path, option, unrecognised_as_csv=True, hints=hints)))


def _status_of(path: Path) -> str:
    meta = read_meta(path if path.is_dir() else path.parent)
    if not meta or not meta.get("status"):
        return ""
    return f" (meta.json: the run is {meta['status']})"


def _load_rows(path: Path, option: str, unrecognised_as_csv: bool, hints: LogHints) -> list[ResultRow]:
    if path.is_dir() or not path.exists():
        return read_rows(path, option)
    if not path.is_file():
        raise UserInputError(option, f"{path} is not a file or a results folder")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UserInputError(option, f"cannot read {path}: {exc.strerror or exc}") from None
    start = text.lstrip()
    if start.startswith("{"):
        return _rows_from_json_text(text, path, option)
    if "schema_version" in start.partition("\n")[0].rstrip("\r").split(","):
        return read_rows(path, option)
    from nccl_bench.results.nccltests import failure_line, parse_text

    rows = parse_text(text, source=str(path), option=option, op=hints.op, ranks=hints.ranks)
    failure = failure_line(text)
    if rows:
        if failure is not None:  # the rows before a failure were measured; say what stopped the run
            message = f"{path}: the run failed after {len(rows)} row(s); the log says: {failure}"
            warnings.warn(message, ResultsWarning, stacklevel=2)
        return rows
    failure = failure_line(text, nccl_warnings=True)
    if failure is not None:  # an nccl-tests run that failed before its first result line
        raise UserInputError(option, f"{path}: no result lines; the log says: {failure}")
    if unrecognised_as_csv:
        return read_rows(path, option)  # its errors say what a results CSV lacks
    raise UserInputError(option, f"{path}: no nccl-tests result lines found")


def _rows_from_json_text(text: str, path: Path, option: str) -> list[ResultRow]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise UserInputError(option, f"{path} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise UserInputError(option, f"{path}: expected a JSON object")
    if document.get("format") == JSON_FORMAT_NAME:
        return rows_from_json(document, str(path), option)
    if "results" in document:
        from nccl_bench.results.nccltests_json import parse_json

        return parse_json(document, source=str(path), option=option)
    raise UserInputError(option, f"{path} is neither an nccl_bench JSON export nor nccl-tests -J output")


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
    runs: list[tuple[str, list[ResultRow]]] = []
    seen: dict[str, int] = {}
    for path in paths:
        label = run_label(path)
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label} ({seen[label]})"
        runs.append((label, load_rows(path, option, hints=hints)))
    return runs


