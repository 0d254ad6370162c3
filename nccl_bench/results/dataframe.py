"""Result rows as a typed pandas DataFrame, for analysis in notebooks (pandas is imported here only)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.schema import (
    _FLOAT_COLUMNS,
    _INT_COLUMNS,
    _OPTIONAL_INT_COLUMNS,
    COLUMNS,
    ResultRow,
    row_to_record,
)


def rows_to_frame(rows: Iterable[ResultRow]):
    """A pandas DataFrame in the column contract's order and types, for analysis in notebooks.

    Whole-number columns are int64, the ones that may be missing (wrong, max_time_rank) pandas'
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
