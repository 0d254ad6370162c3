"""The history's driver calls, each bounded and said: a lock (SQLite's, retried in short driver calls so
a Ctrl-C reaches the process between them; PostgreSQL's lock_timeout) is waited for at most the
address's wait_s (--history-wait), a wait past NOTE_AFTER_S is said once, and whatever the driver
raises becomes one StoreError naming the store and the cause with its exit code: 3 where the history
is unusable now, 2 where what was named is no history at all (errors.StoreError).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from nccl_bench.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, StoreError, UserInputError, first_line
from nccl_bench.history.address import POSTGRESQL, WAIT_KEY, StoreAddress
from nccl_bench.history.store_schema import TABLES

LOCKED_OR_BUSY = "locked by another writer, or busy"  # what a long wait for a statement is, as said
NOTE_AFTER_S = 2.0  # a wait longer than this is said, once per command
RETRY_PAUSE_S = 0.05


class Guard:
    """Every driver call of one store, bounded by the address's wait_s: locks retried (SQLite) until
    then, the driver's errors turned into StoreError, and a wait past NOTE_AFTER_S said once."""

    def __init__(self, address: StoreAddress, say: Callable[[str], None] | None):
        self.address = address
        self._say = say
        self._since: float | None = None
        self._waiting_for = ""
        self._said = False
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None

    def call(self, action: Callable[[], Any], waiting_for: str) -> Any:
        started = time.monotonic()
        self._begin(started, waiting_for)
        try:
            while True:
                try:
                    return action()
                except (StoreError, UserInputError):
                    raise
                except Exception as exc:
                    if locked(exc) and not self._postgres and time.monotonic() - started < self.address.wait_s:
                        time.sleep(RETRY_PAUSE_S)
                        continue
                    raise self.error(exc) from None
        finally:
            self._since = None

    @property
    def _postgres(self) -> bool:
        return self.address.kind == POSTGRESQL

    def _begin(self, started: float, waiting_for: str) -> None:
        self._since, self._waiting_for = started, waiting_for
        if self._say is not None and not self._said and self._watch is None and waiting_for:
            self._watch = threading.Thread(target=self._watching, name="nccl-bench-history-wait", daemon=True)
            self._watch.start()

    def _watching(self) -> None:
        while not self._stop.wait(0.25):
            since = self._since
            if since is not None and time.monotonic() - since >= NOTE_AFTER_S and self._waiting_for:
                self._said = True
                self._say(f"waiting for the history {self.address.shown}: {self._waiting_for} "
                          f"(at most {self.address.wait_s:g} s; {{{WAIT_KEY}}} sets it)")
                return

    def stop(self) -> None:
        self._stop.set()

    def error(self, exc: BaseException) -> StoreError:
        """The driver's error as one line naming the store, with the exit code of what it means."""
        cause, code = _cause(exc, self.address)
        return StoreError(f"{self.address.shown}: {self.address.hide(cause)}", code)


def locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return ("database is locked" in text or "database table is locked" in text or "database schema is locked" in text
            or getattr(exc, "sqlstate", None) == "55P03")


def _cause(exc: BaseException, address: StoreAddress) -> tuple[str, int]:
    """What went wrong, in words, and whether the history is unusable now (3) or no history at all (2)."""
    said = first_line(exc)
    text, sqlstate = said.lower(), getattr(exc, "sqlstate", None)
    waited = f"gave up after {address.wait_s:g} s ({{{WAIT_KEY}}} sets how long)"
    if locked(exc):
        return f"locked by another writer; {waited}", EXIT_RUN_FAILED
    if sqlstate == "57014":
        return f"a statement ran past its limit ({said}); the server is busy", EXIT_RUN_FAILED
    if "timeout expired" in text:
        return f"no answer from the server; {waited}", EXIT_RUN_FAILED
    if "readonly database" in text or "read-only" in text:
        return "cannot be written (a read-only file or folder)", EXIT_RUN_FAILED
    if "file is not a database" in text:
        return "not an SQLite file, so not a history", EXIT_BAD_INPUT
    if "unable to open database file" in text:
        return f"cannot be opened ({_why_unopenable(address)})", EXIT_RUN_FAILED
    if "no such table" in text or sqlstate == "42P01":
        return f"is damaged ({said}); a history has tables {', '.join(TABLES)}", EXIT_RUN_FAILED
    if _refused_credentials(text, sqlstate):
        return (f"the server refused the credentials ({said}): check the user and password (the URL, "
                "PGPASSWORD or ~/.pgpass)"), EXIT_RUN_FAILED
    # No SQLSTATE: the connection itself broke; class 08 (connection) and 57 (the server shutting down,
    # crashed or starting) say the same from the server's side.
    if type(exc).__module__.startswith("psycopg") and (sqlstate is None or sqlstate[:2] in ("08", "57")):
        return f"the server cannot be reached or closed the connection ({said})", EXIT_RUN_FAILED
    if isinstance(exc, OSError):
        return exc.strerror or said, EXIT_RUN_FAILED
    return said, EXIT_RUN_FAILED


# What libpq says when the server turns the user away (its SQLSTATE class 28, which a failed connection does
# not carry): a wrong or missing password, an authentication method that failed, no pg_hba.conf rule for them.
_REFUSED = ("authentication failed", "no password supplied", "no pg_hba.conf entry", "password is required")


def _refused_credentials(text: str, sqlstate: str | None) -> bool:
    return (sqlstate or "").startswith("28") or any(words in text for words in _REFUSED)


def _why_unopenable(address: StoreAddress) -> str:
    folder = Path(address.target).resolve().parent
    if not folder.is_dir():
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} cannot be written, and SQLite writes its journal there"
    return "the file cannot be read"
