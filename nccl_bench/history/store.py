"""The history behind one small interface: `open_store(address)` -> Store, with `add_run`, the series'
aggregates and windows, and the doctor's hosts. SQLite (stdlib) by default, PostgreSQL for a fleet.

Why psycopg 3 (the optional extra `postgres`) and not SQLAlchemy Core: the store needs a dozen
statements that both databases accept as written, so a dialect layer would add a large dependency
and hide no difference worth hiding; psycopg is the maintained libpq driver, takes a libpq URI or
keyword string as it is (Unix sockets, passwords from ~/.pgpass or PGPASSWORD) and ships binary wheels.

Every driver call goes through one guard (history/store_guard.py): whatever the driver raises becomes a
StoreError, one line naming the store and the cause with its exit code (errors.StoreError), and every
wait is bounded by the address's wait_s (--history-wait) and said once it passes NOTE_AFTER_S. SQLite
waits for a lock in short driver calls retried from Python (its own busy wait sleeps in C, where a
Ctrl-C cannot reach it); PostgreSQL gets connect, lock and statement timeouts.

Concurrency: SQLite in WAL mode, each run written in one `BEGIN IMMEDIATE` transaction, so
concurrent writers wait for each other instead of failing; PostgreSQL runs each run in one transaction
too, and schema migrations under an advisory lock. A run already stored (same run id) is left as it
is: `INSERT ... ON CONFLICT DO NOTHING` both databases understand.

Values: only finite, non-negative busbw and times within MAX_BUSBW_GBPS and MAX_TIME_US go in (a
run with another is refused), and only such rows come out (a store written otherwise keeps them, and
the readers skip them: unusable_values counts them). Text comes out with control characters shown as
escapes, and host names as DNS compares them (lower case, no trailing dot).
"""

from __future__ import annotations

import json
from contextlib import contextmanager, suppress
from typing import Any, Callable, Iterator

from nccl_bench.errors import EXIT_BAD_INPUT, StoreError
from nccl_bench.history.address import POSTGRESQL, StoreAddress
from nccl_bench.history.records import RunRecord
from nccl_bench.history.store_connect import connect, refuse_unreadable
from nccl_bench.history.store_guard import LOCKED_OR_BUSY, Guard
from nccl_bench.history.store_schema import (
    ESCAPED_TEXT_VERSION,
    MIGRATIONS,
    RAW_TEXT_COLUMNS,
    SCHEMA_VERSION,
    SERIES_COLUMNS,
    TABLES,
    TABLES_COMPLETE_VERSION,
)
from nccl_bench.history.stored_values import (
    MAX_BUSBW_GBPS,
    MAX_TIME_US,
    clean_rows,
    clean_text,
    refuse_bad_values,
    stored_form,
)
from nccl_bench.units.clock import utc_now_iso
from nccl_bench.units.passwords import hide_passwords_in

__all__ = ["StoreError", "Store", "open_store", "refuse_unreadable"]

_MIGRATION_LOCK = 0x6E63_6362  # PostgreSQL advisory lock key held while the schema is brought up to date
# A stored value the readers use: finite (NaN and inf fail both comparisons), non-negative, in bounds.
_GOOD_VALUES = (f"busbw_gbps >= 0 AND busbw_gbps <= {MAX_BUSBW_GBPS:.0f} "
                f"AND (time_us IS NULL OR (time_us >= 0 AND time_us <= {MAX_TIME_US:.0f}))")
_HOST = "lower(rtrim(host, '.'))"  # a host name as DNS compares it


def open_store(address: StoreAddress, say: Callable[[str], None] | None = None, reading: bool = False) -> "Store":
    """The store at `address`, its schema brought up to date; a store of a newer schema is refused.
    `say` hears that a wait goes on; `reading`: only reads follow (an SQLite file in a folder this user
    cannot write is then read as it is)."""
    waits = Guard(address, say)
    connection, writable = connect(address, waits, reading)
    store = Store(connection, address, waits)
    try:
        store.migrate(writable)
        store.check_tables()
    except BaseException:
        store.close()
        raise
    return store


class Store:
    """One connection; every write is one transaction. `?` placeholders throughout."""

    def __init__(self, connection, address: StoreAddress, waits: Guard | None = None):
        self.connection = connection
        self.address = address
        self.postgres = address.kind == POSTGRESQL
        self.waits = waits or Guard(address, None)

    def close(self) -> None:
        self.waits.stop()
        with suppress(Exception):  # a connection the server already closed is closed
            self.connection.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    def _call(self, action: Callable[[], Any]) -> Any:
        return self.waits.call(action, LOCKED_OR_BUSY)

    def execute(self, statement: str, params: tuple = ()):
        def run():
            cursor = self.connection.cursor()
            cursor.execute(self._sql(statement), params)
            return cursor

        return self._call(run)

    def one(self, statement: str, params: tuple = ()) -> tuple | None:
        """The first row of a statement's answer, fetched under the same guard."""
        cursor = self.execute(statement, params)
        return self._call(cursor.fetchone)

    def executemany(self, statement: str, rows: list[tuple]) -> None:
        self._call(lambda: self.connection.cursor().executemany(self._sql(statement), rows))

    def rows(self, statement: str, params: tuple = ()) -> Iterator[tuple]:
        """The rows one at a time, as the driver fetches them: memory stays flat on a large store."""
        cursor = self.execute(statement, params)
        while True:
            batch = self._call(lambda: cursor.fetchmany(1000))
            if not batch:
                return
            yield from clean_rows(iter(batch))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with suppress(Exception):  # a connection that broke mid-transaction has nothing left to undo
                self.connection.cursor().execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def tables(self) -> set[str]:
        statement = ("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                     if self.postgres else "SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(row[0]) for row in self.rows(statement)}

    def version(self) -> int:
        tables = self.tables()
        if "store_info" not in tables:
            if tables and not self.postgres:  # another program's SQLite file: never written into
                raise StoreError(f"{self.address.shown} is not an nccl-bench history (it holds other tables: "
                                 f"{', '.join(sorted(tables)[:3])})", EXIT_BAD_INPUT)
            return 0
        row = self.one("SELECT value FROM store_info WHERE name = 'schema_version'")
        return int(row[0]) if row else 0

    def migrate(self, writable: bool = True) -> None:
        """The store brought up to SCHEMA_VERSION; one that cannot be written is read as it is when its
        tables are complete."""
        version = self.version()
        if version == SCHEMA_VERSION or (not writable and TABLES_COMPLETE_VERSION <= version < SCHEMA_VERSION):
            return
        with self.transaction():
            if self.postgres:
                self.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            version = self.version()
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.address.shown} was written by a newer nccl-bench (store schema {version}; "
                                 f"this one reads up to {SCHEMA_VERSION}): upgrade nccl-bench", EXIT_BAD_INPUT)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    self.execute(statement)
                if step == ESCAPED_TEXT_VERSION:
                    self._escape_raw_text()
            self.execute("DELETE FROM store_info WHERE name = 'schema_version'")
            self.execute("INSERT INTO store_info (name, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _escape_raw_text(self) -> None:
        """Text an older tool stored raw (a host name holding ESC) escaped as stored_form escapes it today:
        each series whose key changes moves its results to the escaped key (merged with a series already
        there), and every other table's rows are rewritten in place."""
        columns = ", ".join(SERIES_COLUMNS)
        for old_id, *key in self._raw_rows(f"SELECT series, {columns} FROM series"):
            new_id, new_key = clean_text(old_id), [clean_text(part) for part in key]
            if new_id == old_id:
                continue
            assignments = ", ".join(f"{column} = ?" for column in ("series", *SERIES_COLUMNS))
            self.execute(f"UPDATE results SET {assignments} WHERE series = ?", (new_id, *new_key, old_id))
            self.execute("DELETE FROM series WHERE series = ?", (old_id,))
            self.execute(f"INSERT INTO series (series, {columns}) VALUES ({', '.join('?' * (len(key) + 1))}) "
                         "ON CONFLICT (series) DO NOTHING", (new_id, *new_key))
        for table, (where, texts) in RAW_TEXT_COLUMNS.items():
            for row in self._raw_rows(f"SELECT {', '.join(where + texts)} FROM {table}"):
                found, old = row[:len(where)], row[len(where):]
                new = tuple(clean_text(value) for value in old)
                if new != tuple(old):
                    self.execute(f"UPDATE {table} SET {', '.join(f'{column} = ?' for column in texts)} WHERE "
                                 f"{' AND '.join(f'{column} = ?' for column in where)}", (*new, *found))

    def _raw_rows(self, statement: str) -> list[tuple]:
        """Every row as stored, control characters and all (rows() gives them back escaped)."""
        cursor = self.execute(statement)
        return self._call(cursor.fetchall)

    def check_tables(self) -> None:
        """A store of this schema with a table gone is damaged: said at once, not mid-command."""
        missing = [table for table in TABLES if table not in self.tables()]
        if missing:
            raise StoreError(f"{self.address.shown} is damaged: no table {', '.join(missing)} (a history has "
                             f"{', '.join(TABLES)}); restore it from a backup or start a new one")

    # -- writing -------------------------------------------------------------------------------
    def add_run(self, run: RunRecord) -> bool:
        """Store the run; False when a run with its id is already stored (then nothing changes)."""
        refuse_bad_values(run)
        run = stored_form(run)
        recorded = utc_now_iso()
        meta = json.dumps(hide_passwords_in(run.meta), sort_keys=True, default=str, allow_nan=False)
        with self.transaction():
            cursor = self.execute(
                "INSERT INTO runs (run_id, kind, status, started_utc, recorded_utc, source, system, backend, "
                "world_size, nodes, verdict, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                (run.run_id, run.kind, run.status, run.started_utc, recorded, run.source, run.system, run.backend,
                 run.world_size, run.nodes, run.verdict, meta))
            if cursor.rowcount == 0:
                return False
            self._add_values(run)
            self._add_hosts(run)
            self._add_row_hosts(run)
        return True

    def _add_values(self, run: RunRecord) -> None:
        columns = ", ".join(SERIES_COLUMNS)
        self.executemany(f"INSERT INTO results (run_id, series, {columns}, started_utc, usable, busbw_gbps, "
                         f"time_us, noise) VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 7))})", [
            (run.run_id, value.series, *value.key, run.started_utc, int(run.usable), value.busbw_gbps, value.time_us,
             value.noise) for value in run.values
        ])
        self.executemany(
            f"INSERT INTO series (series, {columns}) VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 1))}) "
            "ON CONFLICT (series) DO NOTHING", [(value.series, *value.key) for value in run.values])

    def _add_hosts(self, run: RunRecord) -> None:
        kinds: dict[str, set[str]] = {}
        for host in run.hosts:  # node1, Node1 and node1. are one host
            kinds.setdefault(_dns_name(host.host), set()).update(host.kinds)
        for host, found in kinds.items():
            self.execute("INSERT INTO doctor_hosts (run_id, host, started_utc, flagged) VALUES (?, ?, ?, ?)",
                         (run.run_id, host, run.started_utc, int(bool(found))))
            for kind in sorted(found):
                self.execute("INSERT INTO doctor_flags (run_id, host, kind) VALUES (?, ?, ?)", (run.run_id, host, kind))

    def _add_row_hosts(self, run: RunRecord) -> None:
        taken: dict[str, int] = {}
        late: list[tuple[str, float | None]] = []
        for host in run.row_hosts:  # node1, Node1 and node1. are one host
            name = _dns_name(host.host)
            taken[name] = taken.get(name, 0) + host.rows
            late.extend((name, value) for value in host.late_us)
        self.executemany("INSERT INTO row_hosts (run_id, host, started_utc, row_count) VALUES (?, ?, ?, ?)",
                         [(run.run_id, host, run.started_utc, rows) for host, rows in taken.items()])
        self.executemany("INSERT INTO late_rows (run_id, host, row_index, late_us) VALUES (?, ?, ?, ?)",
                         [(run.run_id, host, index, value) for index, (host, value) in enumerate(late)])

    # -- reading -------------------------------------------------------------------------------
    def run_count(self) -> int:
        return int(self.one("SELECT COUNT(*) FROM runs")[0])

    def unusable_values(self, series: str | None = None, since: tuple[str, str] | None = None) -> int:
        """Values of usable runs the readers skip: not finite, negative or beyond bounds (a store written
        by hand or by an older tool). Of the whole store, or of one series from the run `since` on (what the
        rule read: bounded by the index, whatever the store holds)."""
        where, params = "", ()
        if series is not None:
            where, params = " AND series = ?", (series,)
            if since is not None:
                where += " AND (started_utc > ? OR (started_utc = ? AND run_id >= ?))"
                params += (since[0], since[0], since[1])
        row = self.one(f"SELECT COUNT(*) - COUNT(CASE WHEN {_GOOD_VALUES} THEN 1 END) FROM results WHERE usable = 1"
                       f"{where}", params)
        return int(row[0] or 0)

    def series_aggregates(self, op: str | None) -> Iterator[tuple]:
        """Per usable series: its columns, then runs, min and max busbw, and min and max time (us, None
        where no run kept one); in series order."""
        where, params = _op_filter(op)
        columns = ", ".join(f"s.{column}" for column in SERIES_COLUMNS)
        return self.rows(
            f"SELECT a.series, {columns}, a.runs, a.low, a.high, a.fastest, a.slowest FROM (SELECT series, "
            f"COUNT(*) AS runs, MIN(busbw_gbps) AS low, MAX(busbw_gbps) AS high, MIN(time_us) AS fastest, "
            f"MAX(time_us) AS slowest FROM results WHERE usable = 1 AND {_GOOD_VALUES}"
            f"{where} GROUP BY series) AS a JOIN series AS s ON s.series = a.series ORDER BY a.series", params)

    def series_windows(self, op: str | None, newest: int) -> Iterator[tuple]:
        """(series, run_id, started_utc, busbw) of each series' `newest` usable runs, oldest first per series."""
        where, params = _op_filter(op)
        return self.rows(
            "SELECT series, run_id, started_utc, busbw_gbps FROM (SELECT series, run_id, started_utc, busbw_gbps, "
            "ROW_NUMBER() OVER (PARTITION BY series ORDER BY started_utc DESC, run_id DESC) AS age FROM results "
            f"WHERE usable = 1 AND {_GOOD_VALUES}{where}) AS recent WHERE age <= ? ORDER BY series, started_utc, "
            "run_id", (*params, newest))

    def host_records(self) -> Iterator[tuple]:
        """(host, runs, flagged, last flagged start) per host of the doctor runs."""
        return self.rows(
            f"SELECT {_HOST} AS name, COUNT(*), SUM(flagged), MAX(CASE WHEN flagged = 1 THEN started_utc END) "
            f"FROM doctor_hosts GROUP BY {_HOST} ORDER BY name")

    def host_rows(self) -> Iterator[tuple]:
        """(host, rows taken part in, rows that named it late) per host of the runs' rows."""
        return self.rows(
            f"SELECT t.name, t.taken, COALESCE(l.late, 0) FROM (SELECT {_HOST} AS name, SUM(row_count) AS taken FROM "
            f"row_hosts GROUP BY {_HOST}) AS t LEFT JOIN (SELECT {_HOST} AS name, COUNT(*) AS late FROM late_rows "
            f"GROUP BY {_HOST}) AS l ON l.name = t.name ORDER BY t.name")

    def late_values(self) -> Iterator[tuple]:
        """(host, late_us) of every row that named a host late and said by how much, host by host."""
        return self.rows(f"SELECT {_HOST} AS name, late_us FROM late_rows WHERE late_us IS NOT NULL AND late_us >= 0 "
                         f"AND late_us <= {MAX_TIME_US:.0f} ORDER BY name")

    def host_kinds(self) -> Iterator[tuple]:
        """(host, kind, times) for every kind of suspect each host was."""
        return self.rows(f"SELECT {_HOST} AS name, kind, COUNT(*) FROM doctor_flags GROUP BY {_HOST}, kind "
                         "ORDER BY name, kind")


    # -- reading for the rule --------------------------------------------------------------------
    # Each read is of one series through the index (series, usable, started_utc, ...): the check's
    # cost follows the series asked and the window, not the runs the store holds.
    def series_keys(self, system: str | None, op: str | None) -> Iterator[tuple]:
        """(series, *SERIES_COLUMNS) of every series (of `system`, of `op`, when given), in series order."""
        where = [f"{column} = ?" for column, value in (("system", system), ("op", op)) if value is not None]
        params = tuple(value for value in (system, op) if value is not None)
        return self.rows(f"SELECT series, {', '.join(SERIES_COLUMNS)} FROM series"
                         + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY series", params)

    def series_recent(self, series: str, newest: int, until: tuple[str, str] | None = None) -> list[tuple]:
        """(run_id, started_utc, busbw, noise, time_us) of the series' `newest` usable runs up to and including the run
        `until` (started_utc, run_id; None: the newest), newest first."""
        bound, params = ("", ()) if until is None else (
            " AND (started_utc < ? OR (started_utc = ? AND run_id <= ?))", (until[0], until[0], until[1]))
        return list(self.rows(
            f"SELECT run_id, started_utc, busbw_gbps, noise, time_us FROM results WHERE series = ? AND usable = 1 AND "
            f"{_GOOD_VALUES}{bound} ORDER BY started_utc DESC, run_id DESC LIMIT ?", (series, *params, newest)))

    def series_first(self, series: str, count: int, since: tuple[str, str] | None = None) -> list[tuple]:
        """(run_id, started_utc, busbw, noise, time_us) of the series' first `count` usable runs from the run `since`
        (started_utc, run_id) on, or from its first run; oldest first."""
        bound, params = ("", ()) if since is None else (
            " AND (started_utc > ? OR (started_utc = ? AND run_id >= ?))", (since[0], since[0], since[1]))
        return list(self.rows(
            f"SELECT run_id, started_utc, busbw_gbps, noise, time_us FROM results WHERE series = ? AND usable = 1 AND "
            f"{_GOOD_VALUES}{bound} ORDER BY started_utc, run_id LIMIT ?", (series, *params, count)))

    def accepts_of(self, series: str) -> list[tuple]:
        """(run_id, started_utc, reason, accepted_utc) of the series' accepted runs, oldest run first."""
        return list(self.rows("SELECT run_id, started_utc, reason, accepted_utc FROM accepts WHERE series = ? "
                              "ORDER BY started_utc, run_id", (series,)))

    def other_reasons(self, run_id: str, series: list[str], reason: str) -> list[tuple]:
        """(reason, accepted_utc) of the run's accepts among `series` made with another reason than this one."""
        wanted, said = set(series), clean_text(reason)
        return sorted({(then, when) for name, then, when in self.rows(
            "SELECT series, reason, accepted_utc FROM accepts WHERE run_id = ?", (run_id,))
            if name in wanted and then != said}, key=lambda found: found[1])

    def find_runs(self, prefix: str) -> list[tuple]:
        """(run_id, started_utc, recorded_utc, status, system) of the runs whose id starts with `prefix`
        (lower-case hex, as ids are written); at most two: one is the run, two say it is ambiguous."""
        return list(self.rows("SELECT run_id, started_utc, recorded_utc, status, system FROM runs WHERE run_id >= ? "
                              "AND run_id < ? ORDER BY run_id LIMIT 2", (prefix, prefix + "g")))

    def run_series(self, run_id: str) -> Iterator[tuple]:
        """(series, *SERIES_COLUMNS) of every series the run has a value in, in series order."""
        columns = ", ".join(f"s.{column}" for column in SERIES_COLUMNS)
        return self.rows(f"SELECT s.series, {columns} FROM results AS r JOIN series AS s ON s.series = r.series "
                         "WHERE r.run_id = ? ORDER BY s.series", (run_id,))

    def run_values(self, run_id: str) -> dict[str, float]:
        """series -> busbw of one run's usable values."""
        return {str(series): float(busbw) for series, busbw in self.rows(
            f"SELECT series, busbw_gbps FROM results WHERE run_id = ? AND {_GOOD_VALUES}", (run_id,))}

    def run_metas(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """run_id -> its meta.json as stored, for the runs named (a run the store lacks is left out)."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(run_ids), 500):
            chunk = run_ids[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            for run_id, meta in self.rows(f"SELECT run_id, meta FROM runs WHERE run_id IN ({marks})", tuple(chunk)):
                try:
                    found[str(run_id)] = json.loads(meta)
                except ValueError:
                    found[str(run_id)] = {}
        return found

    def add_accepts(self, run_id: str, started_utc: str, series: list[str], reason: str) -> int:
        """The run becomes the accepted level of each of `series`; returns how many were not accepted yet."""
        accepted = utc_now_iso()
        added = 0
        with self.transaction():
            for name in series:
                cursor = self.execute("INSERT INTO accepts (series, run_id, started_utc, reason, accepted_utc) VALUES "
                                      "(?, ?, ?, ?, ?) ON CONFLICT (series, run_id) DO NOTHING",
                                      (name, run_id, started_utc, clean_text(reason), accepted))
                added += max(0, cursor.rowcount)
        return added


def _dns_name(host: str) -> str:
    """A host name as DNS compares it, as _HOST reads it back."""
    return host.lower().rstrip(".")


def _op_filter(op: str | None) -> tuple[str, tuple]:
    return ("", ()) if op is None else (" AND op = ?", (op,))
