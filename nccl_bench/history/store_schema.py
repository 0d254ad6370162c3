"""The store's tables, one list of statements per schema version (the migrations), and the series key.

The same statements run on SQLite and PostgreSQL: plain types both accept, no autoincrement, and
`?` placeholders (the PostgreSQL side turns them into `%s`). A result row carries its series id and
its run's start time, so a series' window and aggregates are read from one covering index; the
series table holds each series' columns once.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 4
# A store of this version or later has every table the readers read: one that cannot be written (an SQLite
# file in a folder this user cannot write) is read as it is, without the data-only steps after it.
TABLES_COMPLETE_VERSION = 3
# From this version on, stored text holds no raw control character (stored_values.stored_form): the step
# to it escapes what an older tool stored raw, which the readers, looking a series up by the escaped key
# they read, would never find.
ESCAPED_TEXT_VERSION = 4

# (op, placement, size, dtype, world size, nodes, backend, system, --nccl-env variant): what makes two
# numbers comparable.
SERIES_COLUMNS = ("op", "placement", "size_bytes", "dtype", "world_size", "nodes", "backend", "system", "variant")

# MIGRATIONS[v]: the statements that take a store from version v - 1 to v.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS store_info (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, started_utc TEXT NOT NULL,
            recorded_utc TEXT NOT NULL, source TEXT NOT NULL, system TEXT NOT NULL, backend TEXT NOT NULL,
            world_size INTEGER, nodes INTEGER, verdict TEXT NOT NULL, meta TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS results (
            run_id TEXT NOT NULL, series TEXT NOT NULL, op TEXT NOT NULL, placement TEXT NOT NULL,
            size_bytes BIGINT NOT NULL, dtype TEXT NOT NULL, world_size INTEGER NOT NULL, nodes INTEGER NOT NULL,
            backend TEXT NOT NULL, system TEXT NOT NULL, variant TEXT NOT NULL, started_utc TEXT NOT NULL,
            usable INTEGER NOT NULL,
            busbw_gbps DOUBLE PRECISION NOT NULL, time_us DOUBLE PRECISION, PRIMARY KEY (run_id, series))""",
        # covering: a series' window and its aggregates are read from the index alone
        "CREATE INDEX IF NOT EXISTS results_by_series ON results (series, started_utc, run_id, usable, busbw_gbps)",
        """CREATE TABLE IF NOT EXISTS series (
            series TEXT PRIMARY KEY, op TEXT NOT NULL, placement TEXT NOT NULL, size_bytes BIGINT NOT NULL,
            dtype TEXT NOT NULL, world_size INTEGER NOT NULL, nodes INTEGER NOT NULL, backend TEXT NOT NULL,
            system TEXT NOT NULL, variant TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS results_by_op ON results (op)",
        """CREATE TABLE IF NOT EXISTS doctor_hosts (
            run_id TEXT NOT NULL, host TEXT NOT NULL, started_utc TEXT NOT NULL, flagged INTEGER NOT NULL,
            PRIMARY KEY (run_id, host))""",
        "CREATE INDEX IF NOT EXISTS doctor_hosts_by_host ON doctor_hosts (host)",
        """CREATE TABLE IF NOT EXISTS doctor_flags (
            run_id TEXT NOT NULL, host TEXT NOT NULL, kind TEXT NOT NULL, PRIMARY KEY (run_id, host, kind))""",
    ),
    # each run's own noise per series (records.within_run_noise), and the changes accepted as the new normal
    2: (
        "ALTER TABLE results ADD COLUMN noise DOUBLE PRECISION",
        """CREATE TABLE IF NOT EXISTS accepts (
            series TEXT NOT NULL, run_id TEXT NOT NULL, started_utc TEXT NOT NULL, reason TEXT NOT NULL,
            accepted_utc TEXT NOT NULL, PRIMARY KEY (series, run_id))""",
        "CREATE INDEX IF NOT EXISTS accepts_by_series ON accepts (series, started_utc)",
        # covering for the rule: a series' usable window with its noise, read from the index alone
        "CREATE INDEX IF NOT EXISTS results_by_series_v2 ON results (series, usable, started_utc, run_id, busbw_gbps, "
        "noise)",
        "DROP INDEX IF EXISTS results_by_series",
    ),
    # per host of a run's rows: how many it took part in, and each row that named it late (history nodes)
    3: (
        """CREATE TABLE IF NOT EXISTS row_hosts (
            run_id TEXT NOT NULL, host TEXT NOT NULL, started_utc TEXT NOT NULL, row_count INTEGER NOT NULL,
            PRIMARY KEY (run_id, host))""",
        "CREATE INDEX IF NOT EXISTS row_hosts_by_host ON row_hosts (host)",
        """CREATE TABLE IF NOT EXISTS late_rows (
            run_id TEXT NOT NULL, host TEXT NOT NULL, row_index INTEGER NOT NULL, late_us DOUBLE PRECISION,
            PRIMARY KEY (run_id, row_index))""",
        "CREATE INDEX IF NOT EXISTS late_rows_by_host ON late_rows (host)",
    ),
    4: (),  # no table changes: the text rewritten (Store.migrate, ESCAPED_TEXT_VERSION)
}

# Each table's text columns that can hold what a run brought (host names, a backend, a source path), and
# the columns that find one row. series and results are rewritten through the series key, not here.
RAW_TEXT_COLUMNS = {
    "runs": (("run_id",), ("kind", "status", "source", "system", "backend", "verdict")),
    "doctor_hosts": (("run_id", "host"), ("host",)),
    "doctor_flags": (("run_id", "host", "kind"), ("host", "kind")),
    "accepts": (("series", "run_id"), ("series", "reason")),
}


# Every table a whole store has, as the migrations create them.
TABLES = tuple(dict.fromkeys(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)",
                                        " ".join(s for step in MIGRATIONS.values() for s in step))))


def series_id(values: tuple) -> str:
    """The one text key of a series: its columns joined (a series index on one column, not eight)."""
    return "|".join(str(value) for value in values)
