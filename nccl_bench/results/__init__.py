"""Results on disk: the column contract (schema), the crash-safe run folder (store), nccl-tests'
logs and JSON (nccltests), and the one loader that reads any of them (loader).

The names below are the public API for analysis scripts, e.g.
`from nccl_bench.results import load_frame`.
"""

from nccl_bench.results.loader import load_rows
from nccl_bench.results.schema import COLUMNS, SCHEMA_VERSION, ResultRow
from nccl_bench.results.store import load_frame, read_meta, read_rows, rows_to_frame

__all__ = [
    "COLUMNS", "SCHEMA_VERSION", "ResultRow", "load_frame", "load_rows", "read_meta", "read_rows", "rows_to_frame",
]
