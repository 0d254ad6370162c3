"""Plain-text tables that fit a width without cutting a value: the one layout every table uses.

rich's Table shrinks every column to fit a narrow terminal and ellipsizes the cells (`1,79…`),
so numbers vanish exactly where people read them. Here a value is never cut: when the columns
do not fit, whole columns are left out, least important first (each Column's `priority`), and
only free-text columns (`wrap`) fold onto continuation lines. Without a width (a pipe, a CI log,
a file) every column is shown at its natural width, one line per row, as nccl-tests prints.

Use: `layout = fit(columns, rows_of_cells, width)`, then `layout.header_lines()` and
`layout.row_lines(cells)` return rich Text lines (styles survive on a terminal; `.plain` for
files). A streaming table (the live sweep) fixes its widths up front from `Column.width` and
the values it already knows, so later rows line up with the header printed first.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Sequence, Union

from rich.cells import cell_len
from rich.text import Text

Cell = Union[str, Text]
GAP = "  "  # between columns, as nccl-tests
WRAP_MIN_WIDTH = 12  # a folding text column narrower than this reads as noise


@dataclass(frozen=True)
class Column:
    name: str
    unit: str = ""  # second header line, e.g. "(us)"; a table with no units has one header line
    align: str = "right"  # numbers right, words left
    priority: int = 0  # 0: always shown; when the width is short the largest numbers go first
    wrap: bool = False  # free text: folds onto more lines instead of being left out
    width: int = 0  # least width: a streaming table's fixed width; content may widen it


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def natural_width(column: Column, cells: Sequence[Cell] = ()) -> int:
    """Widest of the heading, the unit, the least width and every cell (never narrower)."""
    widths = [column.width, cell_len(column.name), cell_len(column.unit)]
    widths += [_text(c).cell_len for c in cells]
    return max(widths)


def choose_columns(widths: Sequence[int], columns: Sequence[Column], width: int | None, margin: int = 0) -> list[int]:
    """Indices of the columns shown within `width`, in table order.

    Priority-0 columns always stay; the others join from the most important (lowest number)
    down while they fit, and the first that does not fit ends the list: a column is never shown
    while a more important one is left out. A wrapping column counts at WRAP_MIN_WIDTH (it
    folds, it is never cut).
    """
    if width is None:
        return list(range(len(columns)))

    def used(indices: list[int]) -> int:
        total = margin + len(GAP) * max(0, len(indices) - 1)
        for i in indices:
            total += min(widths[i], max(WRAP_MIN_WIDTH, cell_len(columns[i].name))) if columns[i].wrap else widths[i]
        return total

    chosen = [i for i, c in enumerate(columns) if c.priority == 0]
    optional = sorted((i for i, c in enumerate(columns) if c.priority > 0), key=lambda i: (columns[i].priority, i))
    for index in optional:
        trial = sorted(chosen + [index])
        if used(trial) > width:
            break
        chosen = trial
    return chosen


@dataclass(frozen=True)
class Layout:
    """Chosen columns and their widths; renders header and row lines."""

    columns: tuple[Column, ...]  # every column the table has
    shown: tuple[int, ...]  # indices into columns, in order
    widths: tuple[int, ...]  # per shown column
    margin: str = ""  # left of every row
    header_mark: str = ""  # replaces the margin's first characters on header lines ("# " as nccl-tests)
    left_out: tuple[str, ...] = field(default=())  # names of the columns that did not fit
    width: int | None = None  # the width the table fits, None: no limit (a pipe, a file)

    def _prefix(self, header: bool) -> str:
        if header and self.header_mark:
            return self.header_mark + self.margin[len(self.header_mark):]
        return self.margin

    def header_lines(self) -> list[Text]:
        cols = [self.columns[i] for i in self.shown]
        lines = [self._join([c.name for c in cols], header=True)]
        if any(c.unit for c in cols):
            lines.append(self._join([c.unit for c in cols], header=True))
        return lines

    def row_lines(self, cells: Sequence[Cell]) -> list[Text]:
        """One row; more lines only where a wrapping column folds its text."""
        pieces: list[list[Text]] = []
        for position, index in enumerate(self.shown):
            column, text = self.columns[index], _text(cells[index])
            width = self._fold_width(position)
            if column.wrap and width is not None and text.cell_len > width:
                parts = textwrap.wrap(text.plain, width, break_long_words=False, break_on_hyphens=False) or [""]
                pieces.append([Text(part, style=text.style) for part in parts])
            else:
                pieces.append([text])
        height = max(len(p) for p in pieces)
        return [self._join([p[n] if n < len(p) else "" for p in pieces]) for n in range(height)]

    def _fold_width(self, position: int) -> int | None:
        """Where a folding column folds: at its width, except the last column, which has the rest of the line
        and never less than WRAP_MIN_WIDTH (no limit without a width): a streaming table sizes it before any
        text exists, from its heading alone, and a flag folded at five characters reads one word per line."""
        if position != len(self.shown) - 1:
            return self.widths[position]
        if self.width is None:
            return None
        before = len(self.margin) + sum(self.widths[:position]) + len(GAP) * position
        return max(self.widths[position], WRAP_MIN_WIDTH, self.width - before)

    def _join(self, cells: Sequence[Cell], header: bool = False) -> Text:
        line = Text(self._prefix(header))
        last = len(cells) - 1
        for position, cell in enumerate(cells):
            text = _text(cell)
            column = self.columns[self.shown[position]]
            pad = max(0, self.widths[position] - text.cell_len)
            if column.align == "right":
                line.append(" " * pad)
                line.append_text(text)
            else:
                line.append_text(text)
                if position != last:
                    line.append(" " * pad)
            if position != last:
                line.append(GAP)
        line.rstrip()
        return line


def share_width(widths: list[int], wraps: list[bool], floors: list[int], spare: int) -> list[int]:
    """Give the folding columns the spare width: each its floor, then the rest to the widest needs.

    Non-folding widths pass through. A folding column never gets more than it needs; the ones
    that need more share what is left equally (the remainder to the leftmost).
    """
    out = list(widths)
    folding = [i for i, wraps_here in enumerate(wraps) if wraps_here]
    for i in folding:
        out[i] = min(widths[i], floors[i])
    left = spare - sum(out[i] for i in folding)
    hungry = [i for i in folding if widths[i] > out[i]]
    while left > 0 and hungry:
        each, extra = divmod(left, len(hungry))
        for rank, i in enumerate(hungry):
            give = min(widths[i] - out[i], each + (1 if rank < extra else 0))
            out[i] += give
            left -= give
        hungry = [i for i in hungry if widths[i] > out[i]]
        if each == 0 and extra == 0:
            break
    return out


def fit(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    width: int | None,
    margin: str = "",
    header_mark: str = "",
) -> Layout:
    """The layout of `rows` (one cell per column) within `width`; None = no limit (a pipe)."""
    widths = [natural_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    return fit_widths(columns, widths, width, margin, header_mark)


def widen(widths: list[int], cells: Sequence[Cell]) -> None:
    """Natural widths (natural_width of no cells to start) grown in place by one more row's cells."""
    for i, cell in enumerate(cells):
        widths[i] = max(widths[i], _text(cell).cell_len)


def fit_widths(
    columns: Sequence[Column], widths: Sequence[int], width: int | None, margin: str = "", header_mark: str = "",
) -> Layout:
    """fit, given each column's natural width (of every row) instead of the rows."""
    columns, widths = tuple(columns), list(widths)
    shown = choose_columns(widths, columns, width, len(margin))
    shown_widths = [widths[i] for i in shown]
    if width is not None:  # folding columns share what the others leave
        spare = width - len(margin) - len(GAP) * max(0, len(shown) - 1) - sum(
            w for i, w in zip(shown, shown_widths, strict=True) if not columns[i].wrap
        )
        shown_widths = share_width(
            [w for i, w in zip(shown, shown_widths, strict=True)],
            [columns[i].wrap for i in shown],
            [max(WRAP_MIN_WIDTH, cell_len(columns[i].name)) for i in shown],
            spare,
        )
    left_out = tuple(c.name for i, c in enumerate(columns) if i not in shown)
    return Layout(columns, tuple(shown), tuple(shown_widths), margin, header_mark, left_out, width)


def render_lines(
    columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None,
    margin: str = "", header_mark: str = "",
) -> list[Text]:
    """Header and every row of a whole table."""
    layout = fit(columns, rows, width, margin, header_mark)
    lines = layout.header_lines()
    for row in rows:
        lines += layout.row_lines(row)
    return lines
