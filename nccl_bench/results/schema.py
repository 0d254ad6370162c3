"""Result rows and the on-disk column contract: names, units, types, the schema version.

Every CSV row carries `schema_version`, so a bare CSV handed to `compare` or `report` can be
recognised without its meta.json. Units live in the column names (`time_us`, `busbw_gbps`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
# Columns each version added; a file of an older version lacks them and reads them as empty (None, "").
COLUMNS_ADDED: dict[int, tuple[str, ...]] = {2: ("p95_us", "cycle", "group")}
READABLE_VERSIONS = (1, 2)

PLACEMENT_OUT = "out_of_place"
PLACEMENT_IN = "in_place"

STATUS_OK = "ok"
STATUS_WRONG = "wrong"
STATUS_UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class ResultRow:
    """One measured point. Times are per operation; a value that does not exist is None."""

    op: str
    placement: str
    size_bytes: int
    count: int
    dtype: str
    redop: str  # "none" for ops without a reduction, as nccl-tests prints
    root: int  # -1 for rootless ops, as nccl-tests prints
    world_size: int
    nodes: int
    backend: str
    iters: int  # timed operations per trial
    trials: int
    time_us: float | None  # mean per op (nccl-tests convention); median over trials
    time_min_us: float | None  # fastest trial's mean per op
    time_max_us: float | None  # slowest trial's mean per op
    p50_us: float | None  # median single-op latency over all timed ops
    p99_us: float | None
    algbw_gbps: float | None  # size_bytes / time_us, 1e9 bytes/s
    busbw_gbps: float | None  # algbw_gbps * busbw_factor
    busbw_factor: float | None
    wrong: int | None  # elements that failed the check, summed over ranks; None = not checked
    slowest_rank: int | None  # the rank whose time defined the row under agg=max
    agg: str  # how per-rank times were combined: max, avg or min
    peak_gbps: float | None = None  # reference peak bus bandwidth (see limits)
    pct_of_peak: float | None = None  # 100 * busbw_gbps / peak_gbps
    status: str = STATUS_OK  # ok | wrong | unsupported
    flags: str = ""  # ';'-separated warnings: noisy, below_timer_resolution, ...
    p95_us: float | None = None  # 95th percentile single-op latency over all timed ops
    cycle: int | None = None  # which pass of a --cycles run (1, 2, ...); None: a run of one pass
    group: str = ""  # the --split sub-group that measured the row; "": the whole world
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class RunRows:
    """One input's rows, with its path and the argument or option that named it (for messages)."""

    path: Path
    option: str
    rows: tuple[ResultRow, ...]

    @property
    def label(self) -> str:
        return f"{self.option} {self.path}"


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ResultRow))
KEY_COLUMNS = ("op", "size_bytes", "dtype", "redop", "placement", "world_size")
_INT_COLUMNS = {"size_bytes", "count", "root", "world_size", "nodes", "iters", "trials", "schema_version"}
_OPTIONAL_INT_COLUMNS = {"wrong", "slowest_rank", "cycle"}
_FLOAT_COLUMNS = {
    "time_us", "time_min_us", "time_max_us", "p50_us", "p95_us", "p99_us", "algbw_gbps", "busbw_gbps",
    "busbw_factor", "peak_gbps", "pct_of_peak",
}


def required_columns(version: int) -> tuple[str, ...]:
    """The columns a file of results format `version` must have: those added later may be absent."""
    later = {name for added_in, names in COLUMNS_ADDED.items() if added_in > version for name in names}
    return tuple(name for name in COLUMNS if name not in later)


def unreadable_version(version: Any) -> str | None:
    """Why a results format version cannot be read, or None when it can."""
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = None
    if number in READABLE_VERSIONS and str(number) == str(version).strip():
        return None
    if number is not None and number > SCHEMA_VERSION:
        hint = "written by a newer nccl_bench; upgrade to read it"
    elif number is not None and number < min(READABLE_VERSIONS):
        hint = "written by an older nccl_bench"
    else:
        hint = "not a version nccl_bench wrote"
    readable = " and ".join(str(v) for v in READABLE_VERSIONS)
    return f"results format version {version}; this nccl_bench reads versions {readable} ({hint})"


def row_to_record(row: ResultRow) -> dict[str, Any]:
    return dataclasses.asdict(row)


def csv_cells(row: ResultRow) -> list[Any]:
    """One results.csv line in COLUMNS order: None is an empty cell, floats keep every digit (repr)."""
    return ["" if value is None else value for value in row_to_record(row).values()]


def record_to_row(record: dict[str, Any]) -> ResultRow:
    """Inverse of row_to_record for values read back from CSV/JSON (strings, NaN or None).

    A row of an older version comes back in the current one, its missing columns empty.
    """
    values: dict[str, Any] = {}
    for name in COLUMNS:
        raw = record.get(name)
        values[name] = _coerce(name, raw)
    values["schema_version"] = SCHEMA_VERSION
    return ResultRow(**values)


def _is_missing(raw: Any) -> bool:
    return raw is None or raw == "" or (isinstance(raw, float) and raw != raw)


def _coerce(name: str, raw: Any) -> Any:
    if name in _INT_COLUMNS:
        return int(float(raw))
    if name in _OPTIONAL_INT_COLUMNS:
        return None if _is_missing(raw) else int(float(raw))
    if name in _FLOAT_COLUMNS:
        return None if _is_missing(raw) else float(raw)
    return "" if _is_missing(raw) else str(raw)


