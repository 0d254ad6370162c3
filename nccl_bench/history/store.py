"""The results store behind one small interface: `open_store(address)` -> Store, with `add_run`,
the series' aggregates and windows, and the doctor's hosts. SQLite (stdlib) by default, PostgreSQL
for a fleet.

Why psycopg 3 (the optional extra `postgres`) and not SQLAlchemy Core: the store needs a dozen
statements that both databases accept as written, so a dialect layer would add a large dependency
and hide no difference worth hiding; psycopg is the maintained libpq driver, takes a libpq URI as it
is (Unix sockets, passwords from ~/.pgpass or PGPASSWORD) and ships binary wheels (`psycopg[binary]`).

Concurrency: SQLite in WAL mode with a long busy timeout, each run written in one `BEGIN IMMEDIATE`
transaction, so concurrent writers wait for each other instead of failing; PostgreSQL runs each run
in one transaction too, and schema migrations under an advisory lock. A run already stored (same run
id) is left as it is: `INSERT ... ON CONFLICT DO NOTHING` both databases understand.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from nccl_bench.errors import first_line
from nccl_bench.history.address import POSTGRESQL, StoreAddress
from nccl_bench.history.records import RunRecord
from nccl_bench.history.store_schema import MIGRATIONS, SCHEMA_VERSION, SERIES_COLUMNS
from nccl_bench.units.clock import utc_now_iso

BUSY_TIMEOUT_MS = 120_000  # eight CI jobs finishing at once each wait their turn, well under a second each
_MIGRATION_LOCK = 0x6E63_6362  # PostgreSQL advisory lock key held while the schema is brought up to date


class StoreError(Exception):
    """The store cannot be opened or written: one line, naming the store."""


def open_store(address: StoreAddress) -> "Store":
    """The store at `address`, its schema brought up to date; a store of a newer schema is refused."""
    try:
        store = Store(_connect(address), address)
        store.migrate()
    except StoreError:
        raise
    except Exception as exc:  # the driver's own errors: unreachable server, unreadable file, bad URI
        raise StoreError(f"{address.shown}: {first_line(exc)}") from None
    return store


def _connect(address: StoreAddress):
    if address.kind == POSTGRESQL:
        try:
            import psycopg
        except ImportError:
            raise StoreError(f"{address.shown}: PostgreSQL needs psycopg: pip install 'nccl-bench[postgres]'") from None
        return psycopg.connect(address.target, autocommit=True)
    import sqlite3

    Path(address.target).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(address.target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    connection.execute("PRAGMA journal_mode = WAL")
    return connection


class Store:
    """One connection; every write is one transaction. `?` placeholders throughout."""

    def __init__(self, connection, address: StoreAddress):
        self.connection = connection
        self.address = address
        self.postgres = address.kind == POSTGRESQL

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    def execute(self, statement: str, params: tuple = ()):
        cursor = self.connection.cursor()
        cursor.execute(self._sql(statement), params)
        return cursor

    def rows(self, statement: str, params: tuple = ()) -> Iterator[tuple]:
        """The rows one at a time, as the driver fetches them: memory stays flat on a large store."""
        cursor = self.execute(statement, params)
        while True:
            batch = cursor.fetchmany(1000)
            if not batch:
                return
            yield from batch

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def version(self) -> int:
        found = self.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'store_info'" if self.postgres
            else "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'store_info'").fetchone()[0]
        if not found:
            return 0
        row = self.execute("SELECT value FROM store_info WHERE name = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def migrate(self) -> None:
        if self.version() == SCHEMA_VERSION:
            return
        with self.transaction():
            if self.postgres:
                self.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            version = self.version()
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.address.shown} was written by a newer nccl-bench (store schema {version}; "
                                 f"this one reads up to {SCHEMA_VERSION}): upgrade nccl-bench")
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    self.execute(statement)
            self.execute("DELETE FROM store_info WHERE name = 'schema_version'")
            self.execute("INSERT INTO store_info (name, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    # -- writing -------------------------------------------------------------------------------
    def add_run(self, run: RunRecord) -> bool:
        """Store the run; False when a run with its id is already stored (then nothing changes)."""
        recorded = utc_now_iso()
        with self.transaction():
            cursor = self.execute(
                "INSERT INTO runs (run_id, kind, status, started_utc, recorded_utc, source, system, backend, "
                "world_size, nodes, verdict, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                (run.run_id, run.kind, run.status, run.started_utc, recorded, run.source, run.system, run.backend,
                 run.world_size, run.nodes, run.verdict, json.dumps(run.meta, sort_keys=True, default=str)))
            if cursor.rowcount == 0:
                return False
            self._add_values(run)
            self._add_hosts(run)
        return True

    def _add_values(self, run: RunRecord) -> None:
        columns = ", ".join(SERIES_COLUMNS)
        statement = self._sql(f"INSERT INTO results (run_id, series, {columns}, started_utc, usable, busbw_gbps, "
                              f"time_us) VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 6))})")
        self.connection.cursor().executemany(statement, [
            (run.run_id, value.series, *value.key, run.started_utc, int(run.usable), value.busbw_gbps, value.time_us)
            for value in run.values
        ])
        self.connection.cursor().executemany(self._sql(
            f"INSERT INTO series (series, {columns}) VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 1))}) "
            "ON CONFLICT (series) DO NOTHING"), [(value.series, *value.key) for value in run.values])

    def _add_hosts(self, run: RunRecord) -> None:
        for host in run.hosts:
            self.execute("INSERT INTO doctor_hosts (run_id, host, started_utc, flagged) VALUES (?, ?, ?, ?)",
                         (run.run_id, host.host, run.started_utc, int(bool(host.kinds))))
            for kind in host.kinds:
                self.execute("INSERT INTO doctor_flags (run_id, host, kind) VALUES (?, ?, ?)",
                             (run.run_id, host.host, kind))

    # -- reading -------------------------------------------------------------------------------
    def run_count(self) -> int:
        return int(self.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def series_aggregates(self, op: str | None) -> Iterator[tuple]:
        """Per usable series: its columns, then runs, min and max busbw; in series order."""
        where, params = _op_filter(op)
        columns = ", ".join(f"s.{column}" for column in SERIES_COLUMNS)
        return self.rows(
            f"SELECT a.series, {columns}, a.runs, a.low, a.high FROM (SELECT series, COUNT(*) AS runs, "
            f"MIN(busbw_gbps) AS low, MAX(busbw_gbps) AS high FROM results WHERE usable = 1{where} GROUP BY series) "
            "AS a JOIN series AS s ON s.series = a.series ORDER BY a.series", params)

    def series_windows(self, op: str | None, newest: int) -> Iterator[tuple]:
        """(series, run_id, started_utc, busbw) of each series' `newest` usable runs, oldest first per series."""
        where, params = _op_filter(op)
        return self.rows(
            "SELECT series, run_id, started_utc, busbw_gbps FROM (SELECT series, run_id, started_utc, busbw_gbps, "
            "ROW_NUMBER() OVER (PARTITION BY series ORDER BY started_utc DESC, run_id DESC) AS age FROM results "
            f"WHERE usable = 1{where}) AS recent WHERE age <= ? ORDER BY series, started_utc, run_id",
            (*params, newest))

    def host_records(self) -> Iterator[tuple]:
        """(host, runs, flagged, last flagged start) per host of the doctor runs."""
        return self.rows(
            "SELECT host, COUNT(*), SUM(flagged), MAX(CASE WHEN flagged = 1 THEN started_utc END) FROM doctor_hosts "
            "GROUP BY host ORDER BY host")

    def host_kinds(self) -> Iterator[tuple]:
        """(host, kind, times) for every kind of suspect each host was."""
        return self.rows("SELECT host, kind, COUNT(*) FROM doctor_flags GROUP BY host, kind ORDER BY host, kind")


def _op_filter(op: str | None) -> tuple[str, tuple]:
    return ("", ()) if op is None else (" AND op = ?", (op,))
