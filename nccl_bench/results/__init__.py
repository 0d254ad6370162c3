"""Results on disk: the column contract (schema), the run folder and its meta.json (run_folder),
results.csv appended crash-safe and read back (csv_appender, csv_reader), files written whole
(whole_file), nccl-tests' logs and JSON (nccltests_*), and the one loader that reads any of them (loader).

The names below are the public API for analysis scripts, e.g.
`from nccl_bench.results import load_frame`.
"""

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.dataframe import load_frame, rows_to_frame
from nccl_bench.results.loader import load_rows
from nccl_bench.results.run_folder import read_meta
from nccl_bench.results.schema import COLUMNS, SCHEMA_VERSION, ResultRow

__all__ = [
    "COLUMNS", "SCHEMA_VERSION", "ResultRow", "load_frame", "load_rows", "read_meta", "read_rows", "rows_to_frame",
]
