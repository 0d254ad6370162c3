"""Where the history lives: `--history URL` (or NCCL_BENCH_HISTORY) parsed once into an address.

A file path or `sqlite:///PATH` is an SQLite file; a libpq URI (`postgresql://user@host:port/db`,
`postgresql://user@/db?host=/socket/dir&port=N`) or a libpq keyword string (`host=H dbname=D user=U`)
is a PostgreSQL server, handed to the driver as written so every libpq parameter works. A value that
is neither (control characters, `user@host/db` without a scheme, a keyword string libpq would not
read) is refused. Every message shows the address with its password hidden. Pure: nothing is opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench.units.passwords import hide_passwords, secrets_of

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
STORE_FILE = "history.sqlite"  # the default store: <results-root>/history.sqlite
ENV_VAR = "NCCL_BENCH_HISTORY"  # the store when --history is not given (never recorded: a URL may hold a password)
# How long a command waits for a history that is locked, busy or slow to answer (--history-wait):
# eight CI jobs finishing at once each write in well under a second; a lock held longer is news.
DEFAULT_WAIT_S = 20.0
WAIT_KEY = "history_wait_s"  # the option that sets an address's wait_s, by its key (cli/ writes its flag)
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite://"
# libpq's keyword/value form: `key=value` pairs, a value bare or single-quoted with \' and \\ escapes.
_KEYWORD_START = re.compile(r"\s*[A-Za-z_]+\s*=")
_KEYWORD_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s'\\]+)\s*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NO_SCHEME = re.compile(r"[\w.+-]+(:[^@/\s]*)?@[\w.-]+(:\d+)?(/|$)")  # ci@db:5432/bench: a server, not a file
_FORMS = "give a file path, sqlite:///PATH or postgresql://USER@HOST:PORT/DB"


class AddressError(ValueError):
    """A URL that names no store this tool can open."""


@dataclass(frozen=True)
class StoreAddress:
    kind: str  # SQLITE or POSTGRESQL
    target: str  # the SQLite file's path, or the libpq URI or keyword string
    wait_s: float = DEFAULT_WAIT_S  # the longest wait for a lock or an answer before giving up
    # The password as the user wrote it, in every form a driver may echo (units/passwords.secrets_of),
    # PGPASSWORD's too: what every message about this store is masked by
    secrets: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def shown(self) -> str:
        """For messages: the path, or the URI or keyword string without its password."""
        return self.target if self.kind == SQLITE else self.hide(self.target)

    def hide(self, text: str) -> str:
        """`text` (a driver's message about this store) without any form of its password."""
        return hide_passwords(text, self.secrets)


def parse_address(url: str, wait_s: float = DEFAULT_WAIT_S) -> StoreAddress:
    """A file path, sqlite:///PATH (sqlite:////abs/path too), a postgresql:// URI or a libpq keyword string."""
    text = url.strip()
    secrets = secrets_of(text)
    shown = repr(hide_passwords(text, secrets))
    if not text:
        raise AddressError(f"empty URL; {_FORMS}")
    if _CONTROL.search(text):
        raise AddressError(f"{shown} holds a control character; {_FORMS}")
    if text.startswith(_POSTGRES_SCHEMES):
        return StoreAddress(POSTGRESQL, text, wait_s, secrets)
    if _KEYWORD_START.match(text):
        return StoreAddress(POSTGRESQL, _keyword_string(text, shown), wait_s, secrets)
    if text.startswith("sqlite:") and not text.startswith(_SQLITE_SCHEME):
        raise AddressError(f"{shown}: write sqlite:///relative/path or sqlite:////absolute/path")
    if text.startswith(_SQLITE_SCHEME):
        path = text[len(_SQLITE_SCHEME):]
        if not path.startswith("/") or len(path) < 2:
            raise AddressError(f"{shown}: write sqlite:///relative/path or sqlite:////absolute/path")
        return StoreAddress(SQLITE, path[1:], wait_s)
    if "://" in text:
        raise AddressError(f"{shown}: unknown scheme; {_FORMS}")
    if _NO_SCHEME.match(text):
        as_url = hide_passwords(f"postgresql://{text}", secrets)
        raise AddressError(f"{as_url.partition('://')[2]!r} looks like a server without a scheme; write {as_url}")
    return StoreAddress(SQLITE, text, wait_s)


def _keyword_string(text: str, shown: str) -> str:
    """A libpq keyword string as libpq reads it (`host=H dbname=D`); refused when some of it is not key=value."""
    position = 0
    while position < len(text):
        pair = _KEYWORD_PAIR.match(text, position)
        if pair is None:
            raise AddressError(f"{shown} is not a libpq keyword string (key=value ..., a value with spaces "
                               "in single quotes); or write postgresql://USER@HOST:PORT/DB")
        position = pair.end()
    return text


def default_address(results_root: Path, wait_s: float = DEFAULT_WAIT_S) -> StoreAddress:
    return StoreAddress(SQLITE, str(Path(results_root) / STORE_FILE), wait_s)
