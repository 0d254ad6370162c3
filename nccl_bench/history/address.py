"""Where the results store lives: `--history URL` (or NCCL_BENCH_HISTORY) parsed once into an address.

A file path or `sqlite:///PATH` is an SQLite file; a libpq URI (`postgresql://user@host:port/db`,
`postgresql://user@/db?host=/socket/dir&port=N`) is a PostgreSQL server, handed to the driver as
written so every libpq parameter works. Pure: nothing is opened here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
STORE_FILE = "history.sqlite"  # the default store: <results-root>/history.sqlite
ENV_VAR = "NCCL_BENCH_HISTORY"  # the store when --history is not given (never recorded: a URL may hold a password)
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite://"


class AddressError(ValueError):
    """A URL that names no store this tool can open."""


@dataclass(frozen=True)
class StoreAddress:
    kind: str  # SQLITE or POSTGRESQL
    target: str  # the SQLite file's path, or the libpq URI

    @property
    def shown(self) -> str:
        """For messages: the path, or the URI without its password."""
        if self.kind == SQLITE:
            return self.target
        scheme, _, rest = self.target.partition("://")
        user, at, host = rest.rpartition("@")
        if at and ":" in user:
            user = user.split(":", 1)[0] + ":***"
        return f"{scheme}://{user}{at}{host}"


def parse_address(url: str) -> StoreAddress:
    """A file path, sqlite:///PATH (sqlite:////abs/path too) or a postgresql:// URI."""
    text = url.strip()
    if not text:
        raise AddressError("empty URL; give a file path, sqlite:///PATH or postgresql://...")
    if text.startswith(_POSTGRES_SCHEMES):
        return StoreAddress(POSTGRESQL, text)
    if text.startswith("sqlite:") and not text.startswith(_SQLITE_SCHEME):
        raise AddressError(f"{url!r}: write sqlite:///relative/path or sqlite:////absolute/path")
    if text.startswith(_SQLITE_SCHEME):
        path = text[len(_SQLITE_SCHEME):]
        if not path.startswith("/") or len(path) < 2:
            raise AddressError(f"{url!r}: write sqlite:///relative/path or sqlite:////absolute/path")
        return StoreAddress(SQLITE, path[1:])
    if "://" in text:
        raise AddressError(f"{url!r}: unknown scheme; give a file path, sqlite:///PATH or postgresql://...")
    return StoreAddress(SQLITE, text)


def default_address(results_root: Path) -> StoreAddress:
    return StoreAddress(SQLITE, str(Path(results_root) / STORE_FILE))
