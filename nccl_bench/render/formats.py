"""Output formats over a list of ResultRow: table, markdown, csv, json and the nccl-tests layout,
one registry (FORMATS) of name -> renderer that `report` and `render` both dispatch through.

csv holds exactly results.csv's columns, json the same columns plus a format version. Every
renderer takes (rows, title, meta) and returns text; render/live.py prints it, the CLI writes it.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from nccl_bench.errors import OptionError, UserInputError
from nccl_bench.results.loader import JSON_FORMAT_NAME
from nccl_bench.results.schema import (
    COLUMNS,
    SCHEMA_VERSION,
    ResultRow,
    csv_cells,
    row_to_record,
)
from nccl_bench.results.whole_file import strict_json

if TYPE_CHECKING:
    from rich.text import Text


def stream_csv(rows: Iterable[ResultRow]) -> Iterator[str]:
    """results.csv's columns, line by line; None is an empty cell; floats keep every digit (repr)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(csv_cells(row))
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()  # the header alone when there is no row


def stream_json(rows: Iterable[ResultRow]) -> Iterator[str]:
    """The JSON export, one row per line: the same document json.loads reads, written as it goes."""
    head = strict_json({"format": JSON_FORMAT_NAME, "schema_version": SCHEMA_VERSION, "columns": list(COLUMNS)})
    yield head[:-1] + ', "rows": ['
    separator = "\n"
    for row in rows:
        yield separator + strict_json(row_to_record(row))
        separator = ",\n"
    yield "\n]}\n"


def stream_markdown(rows: Iterable[ResultRow], repeats: Sequence[str] = ()) -> Iterator[str]:
    """A GitHub table with the terminal table's columns (the repeat columns `repeats` names), headings and
    cell text, escaped."""
    from nccl_bench.render.escape import markdown_text
    from nccl_bench.render.tables import result_cells, result_columns

    columns = result_columns(repeats)
    headings = [f"{c.name} {c.unit}".strip() for c in columns]
    yield "| " + " | ".join(headings) + " |\n"
    yield "|" + "|".join("---:" if c.align == "right" else "---" for c in columns) + "|\n"
    for row in rows:
        yield "| " + " | ".join(markdown_text(cell) for cell in result_cells(row, repeats)) + " |\n"


def to_csv(rows: list[ResultRow], title: str | None = None, meta: dict | None = None) -> str:
    return "".join(stream_csv(rows))


def to_json(rows: list[ResultRow], title: str | None = None, meta: dict | None = None) -> str:
    return "".join(stream_json(rows))


def to_markdown(rows: list[ResultRow], title: str | None = None, meta: dict | None = None) -> str:
    from nccl_bench.render.tables import repeats_in

    return "".join(stream_markdown(rows, repeats_in(rows)))


def to_nccl_tests(rows: list[ResultRow], title: str | None = None, meta: dict | None = None) -> str:
    """nccl-tests' own layout, with the settings the run's meta.json recorded (it has no title line)."""
    from nccl_bench.render.nccltests_text import format_text

    return format_text(rows, meta)


def to_table(rows: list[ResultRow], title: str | None = None, meta: dict | None = None) -> str:
    """The plain table, every column (a file has no width): what a piped sweep printed."""
    from nccl_bench.render.tables import results_lines

    return "".join(line.plain + "\n" for line in results_lines(rows, None, title=title))


def _terminal_table(rows: Sequence[ResultRow], width: int | None, title: str | None) -> list[Text]:
    from nccl_bench.render.tables import results_lines

    return results_lines(rows, width, title=title)


def _table_streamed(read: Callable[[], Iterable[ResultRow]], width: int | None, title: str | None) -> Iterator[Text]:
    from nccl_bench.render.tables import results_lines_streamed

    return results_lines_streamed(read, width, title)


@dataclass(frozen=True)
class Format:
    """One output format: `text` renders rows (title: the run's name, meta: its meta.json, each used
    where the format shows it); a per_run format gives one block per input, the others one document
    of every input's rows; `terminal`, where set, is what a terminal shows instead, fitted to its width."""

    text: Callable[[list[ResultRow], str | None, dict | None], str]
    per_run: bool = False
    terminal: Callable[[Sequence[ResultRow], int | None, str | None], list[Text]] | None = None
    stream: Callable[[Iterable[ResultRow]], Iterator[str]] | None = None  # the text piece by piece, as rows come
    # a per-run format's lines from two passes over the rows (`read()` gives them each time), at a width
    two_pass: Callable[[Callable[[], Iterable[ResultRow]], int | None, str | None], Iterator[Text]] | None = None
    repeat_columns: bool = False  # `stream` takes the repeat columns (group, cycle) the rows fill: a first pass


FORMATS: dict[str, Format] = {
    "table": Format(to_table, per_run=True, terminal=_terminal_table, two_pass=_table_streamed),
    "markdown": Format(to_markdown, stream=stream_markdown, repeat_columns=True),
    "csv": Format(to_csv, stream=stream_csv),
    "json": Format(to_json, stream=stream_json),
    "nccl-tests": Format(to_nccl_tests, per_run=True),
}


def check_format(fmt: str) -> str:
    """`fmt` if it is a format's name; an error naming the option by key (`fmt`) if not."""
    if fmt not in FORMATS:
        raise OptionError("fmt", f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def render(rows: list[ResultRow], fmt: str, title: str | None = None, meta: dict | None = None) -> str:
    """Text in any format; every file ends with a newline. `meta`: the run's meta.json, if any."""
    return FORMATS[check_format(fmt)].text(rows, title, meta)


def render_runs(paths: list[Path], loaded: list[tuple[str, list[ResultRow]]], fmt: str) -> str:
    """`report`'s text for several inputs: a per-run format repeats per input (with its label and
    what its own meta.json recorded), the others make one document of all rows."""
    if FORMATS[check_format(fmt)].per_run:
        runs = zip(paths, loaded, strict=True)
        return "".join(render(rows, fmt, title=label, meta=run_meta(path)) for path, (label, rows) in runs)
    return render([row for _, rows in loaded for row in rows], fmt)


def run_meta(path: Path) -> dict | None:
    """meta.json of a run folder, or of the folder a results.csv sits in; None for other inputs."""
    from nccl_bench.results.run_folder import META_JSON, RESULTS_CSV, read_meta

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

