"""Opening a history's connection: SQLite (stdlib, WAL, short driver waits retried from Python) or
PostgreSQL (psycopg, with lock and statement timeouts), and refusing a PostgreSQL address libpq cannot
read before a run measures. Every wait goes through the store's guard (history/store_guard.py), so each
is bounded by the address's wait_s and a Ctrl-C is answered (history/store.py says why)."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

from nccl_bench.errors import EXIT_BAD_INPUT, StoreError, first_line
from nccl_bench.history.address import POSTGRESQL, StoreAddress
from nccl_bench.history.store_guard import LOCKED_OR_BUSY, Guard

SQLITE_TRY_MS = 100  # one try at an SQLite lock inside the driver: a Ctrl-C waits at most this long
STATEMENT_LIMIT_S = 300.0  # PostgreSQL: the longest one statement may run (a large store answers in seconds)


def connect(address: StoreAddress, waits: Guard, reading: bool) -> tuple[Any, bool]:
    """The connection to `address`, and whether it may write (False: an SQLite file read as it is)."""
    if address.kind == POSTGRESQL:
        return waits.call(lambda: _connect_postgres(address), "no answer from the server yet"), True
    return _connect_sqlite(address, waits, reading)


def _connect_postgres(address: StoreAddress):
    try:
        import psycopg
    except ImportError:
        raise StoreError(f"{address.shown}: PostgreSQL needs psycopg: pip install 'nccl-bench[postgres]'") from None
    # psycopg logs what it ignores while a broken connection closes ("error ignored terminating
    # <psycopg.Pipeline [BAD]>"); with no handler, Python's last resort would print it on stderr beside
    # the one line that says the history failed.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    try:
        connection = psycopg.connect(address.target, autocommit=True,
                                     connect_timeout=max(2, math.ceil(address.wait_s)))
    except psycopg.ProgrammingError as exc:  # libpq could not read the address itself
        raise _unreadable(address, exc) from None
    try:
        for name, seconds in (("lock_timeout", address.wait_s), ("statement_timeout", STATEMENT_LIMIT_S)):
            connection.execute("SELECT set_config(%s, %s, false)", (name, f"{round(seconds * 1000)}ms"))
    except BaseException:
        connection.close()
        raise
    return connection


def refuse_unreadable(address: StoreAddress) -> None:
    """A PostgreSQL address libpq cannot read (a bad '%' escape, an unterminated quote) refused before a
    run that would record into it measures; nothing is connected. Without psycopg the run's record says so."""
    if address.kind != POSTGRESQL:
        return
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    try:
        conninfo_to_dict(address.target)
    except psycopg.ProgrammingError as exc:
        raise _unreadable(address, exc) from None


def _unreadable(address: StoreAddress, exc: BaseException) -> StoreError:
    return StoreError(f"{address.shown}: not a PostgreSQL address libpq reads ({address.hide(first_line(exc))})",
                      EXIT_BAD_INPUT)


def _connect_sqlite(address: StoreAddress, waits: Guard, reading: bool) -> tuple[Any, bool]:
    """The connection, and whether it may write (False: a file read as it is)."""
    import sqlite3

    path = Path(address.target)
    if path.is_dir():
        raise StoreError(f"{address.shown} is a folder, not a history file", EXIT_BAD_INPUT)
    if path.exists() and not path.is_file():
        raise StoreError(f"{address.shown} is not a regular file, so not a history file", EXIT_BAD_INPUT)
    read_as_is = reading and path.is_file() and not _writable(path)
    if not read_as_is:
        waits.call(lambda: path.parent.mkdir(parents=True, exist_ok=True), "")

    def connect():
        if read_as_is:  # no -wal/-shm can be made here: read the file as it is, as nobody writes it
            return sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True, isolation_level=None)
        connection = sqlite3.connect(address.target, timeout=SQLITE_TRY_MS / 1000, isolation_level=None)
        try:
            connection.execute(f"PRAGMA busy_timeout = {SQLITE_TRY_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
        except BaseException:
            connection.close()
            raise
        return connection

    return waits.call(connect, LOCKED_OR_BUSY), not read_as_is


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
