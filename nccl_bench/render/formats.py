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
    from nccl_bench.units.sizes import format_size

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
    from nccl_bench.render.nccltests import format_text

    return format_text(rows)


def to_table(rows: list[ResultRow], title: str | None = None) -> str:
    """The plain table, every column (a file has no width): what a piped sweep printed."""
    from nccl_bench.render.tables import results_lines

    return "".join(line.plain + "\n" for line in results_lines(rows, None, title=title))


def render(rows: list[ResultRow], fmt: str, title: str | None = None) -> str:
    """Text in any format; every file ends with a newline."""
    check_format(fmt)
    if fmt == "table":
        return to_table(rows, title)
    return {"markdown": to_markdown, "csv": to_csv, "json": to_json, "nccl-tests": to_nccl_tests}[fmt](rows)


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

