"""Output formats over a list of ResultRow: table, markdown, csv, json and the nccl-tests layout.

csv holds exactly results.csv's columns, json the same columns plus a format version. Renderers
return text or a renderable; callers print or write it.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from nccl_bench.errors import UserInputError
from nccl_bench.results.loader import JSON_FORMAT_NAME
from nccl_bench.results.schema import (
    COLUMNS,
    SCHEMA_VERSION,
    ResultRow,
    csv_cells,
    row_to_record,
)

FORMATS = ("table", "markdown", "csv", "json", "nccl-tests")


def check_format(fmt: str, option: str = "--format") -> str:
    if fmt not in FORMATS:
        raise UserInputError(option, f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


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
    """A GitHub table with the terminal table's columns, headings and cell text."""
    from nccl_bench.render.tables import RESULT_COLUMNS, result_cells

    headings = [f"{c.name} {c.unit}".strip() for c in RESULT_COLUMNS]
    lines = [
        "| " + " | ".join(headings) + " |",
        "|" + "|".join("---:" if c.align == "right" else "---" for c in RESULT_COLUMNS) + "|",
    ]
    for row in rows:
        cells = [str(cell).replace("|", "\\|") for cell in result_cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_nccl_tests(rows: list[ResultRow], meta: dict | None = None) -> str:
    from nccl_bench.render.nccltests import format_text

    return format_text(rows, meta)


def to_table(rows: list[ResultRow], title: str | None = None) -> str:
    """The plain table, every column (a file has no width): what a piped sweep printed."""
    from nccl_bench.render.tables import results_lines

    return "".join(line.plain + "\n" for line in results_lines(rows, None, title=title))


def render(rows: list[ResultRow], fmt: str, title: str | None = None, meta: dict | None = None) -> str:
    """Text in any format; every file ends with a newline. `meta`: the run's meta.json, if any."""
    check_format(fmt)
    if fmt == "table":
        return to_table(rows, title)
    if fmt == "nccl-tests":
        return to_nccl_tests(rows, meta)
    return {"markdown": to_markdown, "csv": to_csv, "json": to_json, "nccl-tests": to_nccl_tests}[fmt](rows)


def render_runs(paths: list[Path], loaded: list[tuple[str, list[ResultRow]]], fmt: str) -> str:
    """`report`'s text for several inputs: a table and an nccl-tests block per run (each with
    what its own meta.json recorded), one document of all rows for the other formats."""
    if fmt == "table":
        return "".join(render(rows, fmt, title=label) for label, rows in loaded)
    if fmt == "nccl-tests":
        return "".join(render(rows, fmt, meta=run_meta(path)) for path, (_, rows) in zip(paths, loaded))
    return render([row for _, rows in loaded for row in rows], fmt)


def run_meta(path: Path) -> dict | None:
    """meta.json of a run folder, or of the folder a results.csv sits in; None for other inputs."""
    from nccl_bench.results.store import META_JSON, RESULTS_CSV, read_meta

    path = Path(path)
    if path.is_dir():
        return read_meta(path)
    if path.name == RESULTS_CSV and (path.parent / META_JSON).is_file():
        return read_meta(path.parent)
    return None


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

