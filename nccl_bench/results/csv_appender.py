"""results.csv (and the doctor's doctor.csv) appended line by line, crash-safe: each line fsynced as
it is written, so a crash loses nothing already measured."""

from __future__ import annotations

import contextlib
import csv
import io
import os
from pathlib import Path
from typing import Any, Iterable

from nccl_bench.errors import WriteFailedError
from nccl_bench.results.run_folder import RESULTS_CSV
from nccl_bench.results.schema import COLUMNS, RANK_COLUMNS, RANKS_CSV, ResultRow, csv_cells


class CsvAppender:
    """Appends lines to a CSV, fsynced per line: a crash keeps every finished line, and a line that
    cannot be written whole (a full disk) is cut back off, so the file stays readable."""

    def __init__(self, path: Path, columns: Iterable[str], start_afresh: bool = False):
        """start_afresh: lines already in the file are dropped (a run that measures them all again)."""
        self.path = Path(path)
        self._columns = list(columns)
        try:
            self._fd: int | None = os.open(
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if start_afresh else 0), 0o666)
        except OSError as exc:
            raise WriteFailedError(self.path, exc) from None
        self._needs_header = os.fstat(self._fd).st_size == 0

    def append_cells(self, cells: Iterable[Any]) -> None:
        self.append_lines([cells])

    def append_lines(self, lines: Iterable[Iterable[Any]]) -> None:
        """Lines written and fsynced at once: whole, or (a full disk) none of them."""
        # The csv module, not pandas: importing pandas cost ~0.5 s inside every sweep.
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        if self._needs_header:
            writer.writerow(self._columns)
        writer.writerows(lines)
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


class RanksWriter(CsvAppender):
    """ranks.csv of a sweep: a point's lines (every trial and rank) in one write, one fsync per point:
    a sync per line would cost a 1,024-rank point a thousand syncs."""

    def __init__(self, run_dir: Path):
        super().__init__(Path(run_dir) / RANKS_CSV, RANK_COLUMNS)
