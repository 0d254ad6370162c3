"""results.csv read back into rows, as a stream, with every check of the column contract: an error names
the line at fault, a last line cut off mid-write is left out with a ResultsWarning."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from typing import Iterator

from nccl_bench.errors import UserInputError, first_line
from nccl_bench.results.input_lines import ResultsWarning, bounded_lines, open_text
from nccl_bench.results.run_folder import META_JSON, RESULTS_CSV
from nccl_bench.results.schema import (
    SCHEMA_VERSION,
    ResultRow,
    record_to_row,
    required_columns,
    unreadable_version,
)


def resolve_results_csv(path: Path, option: str) -> Path:
    """Accept a run folder or a results.csv; name the option when neither is there."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.is_file():
        raise UserInputError(option, f"no results found at {path}")
    return path


def _run_without_rows(path: Path) -> bool:
    """A run folder (or its results.csv named) whose meta.json exists but no row was written yet: no
    results.csv, or the one its writer opened at the start and never wrote to (not even the header, which
    comes with the first row; a rank killed before that leaves 0 bytes, which a restarted attempt reads)."""
    folder = path if path.is_dir() else path.parent if path.name == RESULTS_CSV else None
    if folder is None or not (folder / META_JSON).is_file():
        return False
    try:
        return (folder / RESULTS_CSV).stat().st_size == 0
    except FileNotFoundError:
        return True


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
        handle = open_text(csv_path, newline="", encoding="utf-8-sig")  # -sig: a CSV saved by a spreadsheet
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
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:  # read as a dict, the last copy would win without a word
        raise UserInputError(option, f"{csv_path} has the column {', '.join(twice)} more than once; "
                                     "which copy holds the values cannot be told")
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
        raise UserInputError(option, f"cannot parse {csv_path}: {first_line(exc)}") from None
