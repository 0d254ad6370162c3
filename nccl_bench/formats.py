"""Output formats over a list of ResultRow, and the one loader that reads every input kind.

Formats (`--format`): table (rich, nccl-tests-like), markdown, csv (exactly results.csv's
columns), json (the same columns plus a format version) and nccl-tests (its text layout).
Renderers return text or a renderable; callers print or write it.

Inputs (`load_rows`): a run folder, a results.csv, an nccl_bench JSON export, an nccl-tests
text log or an nccl-tests `-J` JSON file, told apart by their content rather than their name.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from nccl_bench.errors import UserInputError
from nccl_bench.results import COLUMNS, SCHEMA_VERSION, ResultRow, csv_cells, read_rows, record_to_row, row_to_record

FORMATS = ("table", "markdown", "csv", "json", "nccl-tests")
JSON_FORMAT_NAME = "nccl_bench.results"


def check_format(fmt: str, option: str = "--format") -> str:
    if fmt not in FORMATS:
        raise UserInputError(option, f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


# ---- writing ------------------------------------------------------------------------------------


def to_csv(rows: list[ResultRow]) -> str:
    """results.csv's columns; None is an empty cell; floats keep every digit (repr)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(csv_cells(row))
    return buffer.getvalue()


def to_json(rows: list[ResultRow]) -> str:
    document = {
        "format": JSON_FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "columns": list(COLUMNS),
        "rows": [row_to_record(row) for row in rows],
    }
    return json.dumps(document, indent=1) + "\n"


def to_markdown(rows: list[ResultRow]) -> str:
    from nccl_bench.sizes import format_size

    header = ["op", "placement", "size", "count", "type", "redop", "root", "time (us)", "algbw (GB/s)",
              "busbw (GB/s)", "#wrong", "% of peak", "flags"]
    numeric = {"size", "count", "root", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong", "% of peak"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if h in numeric else "---" for h in header) + "|"]
    for r in rows:
        cells = [
            r.op, r.placement, format_size(r.size_bytes), str(r.count), r.dtype, r.redop, str(r.root),
            _fixed(r.time_us), _fixed(r.algbw_gbps), _fixed(r.busbw_gbps),
            "N/A" if r.wrong is None else str(r.wrong), _fixed(r.pct_of_peak, 1), r.flags or "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _fixed(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def to_nccl_tests(rows: list[ResultRow]) -> str:
    from nccl_bench.nccltests import format_text

    return format_text(rows)


def render(rows: list[ResultRow], fmt: str, title: str | None = None):
    """A rich renderable for `table`, text for every other format."""
    check_format(fmt)
    if fmt == "table":
        from nccl_bench.report import results_table

        return results_table(rows, title=title)
    return {"markdown": to_markdown, "csv": to_csv, "json": to_json, "nccl-tests": to_nccl_tests}[fmt](rows)


# ---- reading ------------------------------------------------------------------------------------


def load_rows(path: Path, option: str = "RUN", unrecognised_as_csv: bool = False) -> list[ResultRow]:
    """Rows from a run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.

    An input none of these recognises is reported as a log without result lines or, with
    unrecognised_as_csv (compare, which read only results CSVs at first), as a foreign CSV.
    """
    path = Path(path)
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
    from nccl_bench.nccltests import parse_text

    rows = parse_text(text, source=str(path), option=option)
    if rows:
        return rows
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
        from nccl_bench.nccltests import parse_json

        return parse_json(document, source=str(path), option=option)
    raise UserInputError(option, f"{path} is neither an nccl_bench JSON export nor nccl-tests -J output")


def rows_from_json(document: dict[str, Any], source: str, option: str) -> list[ResultRow]:
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        hint = "written by a newer nccl_bench; upgrade to read it" if newer else "written by an older nccl_bench"
        raise UserInputError(
            option,
            f"{source} has results format version {version}; this nccl_bench reads version {SCHEMA_VERSION} ({hint})",
        )
    records = document.get("rows")
    if not isinstance(records, list):
        raise UserInputError(option, f"{source} has no 'rows' list")
    rows = []
    for index, record in enumerate(records):
        missing = [c for c in COLUMNS if c not in record] if isinstance(record, dict) else list(COLUMNS)
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


def load_runs(paths: list[Path], option: str = "RUN") -> list[tuple[str, list[ResultRow]]]:
    """(label, rows) per input, labels made unique so legends can tell the runs apart."""
    runs: list[tuple[str, list[ResultRow]]] = []
    seen: dict[str, int] = {}
    for path in paths:
        label = run_label(path)
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label} ({seen[label]})"
        runs.append((label, load_rows(path, option)))
    return runs


def check_output_file(path: Path | None, option: str, suffix: str | None = None) -> Path | None:
    """Fail before any work when an output file cannot be written (hyperfine's habit)."""
    if path is None:
        return None
    path = Path(path)
    if suffix and path.suffix.lower() != suffix:
        raise UserInputError(option, f"{path} should end in {suffix}")
    if path.is_dir():
        raise UserInputError(option, f"{path} is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserInputError(option, f"folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserInputError(option, f"cannot write to {path}")
    return path
