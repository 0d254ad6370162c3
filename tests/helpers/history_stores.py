"""Results stores for the tests: an SQLite file, or a fresh database on a real PostgreSQL server that the
session starts itself (Debian's postgresql package: initdb in a temporary folder, a Unix socket only,
run as the `postgres` user), stopped when the session ends."""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

SERVER_USER = "postgres"
_names = itertools.count()


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def why_no_postgres() -> str | None:
    """The missing capability, in words, or None when a server can be started here."""
    if postgres_bin() is None:
        return "PostgreSQL's server is not installed (Debian's postgresql package; scripts/dev.sh test installs it)"
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        return f"no {SERVER_USER} user to run the PostgreSQL server as"
    if os.geteuid() != 0:
        return f"starting PostgreSQL as the {SERVER_USER} user needs root"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'nccl-bench[postgres]')"
    return None


class PostgresServer:
    """initdb + pg_ctl start in `folder`, listening on a Unix socket in it, and nowhere else."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.data = folder / "data"
        self.bin = postgres_bin()
        shutil.chown(folder, SERVER_USER)
        self._as_server("initdb", "-D", str(self.data), "-A", "trust", "-U", SERVER_USER, "--no-sync", "-E", "UTF8")
        # fsync off: a test server's data need not survive a power cut, and syncs on a loaded disk cost seconds
        self._as_server("pg_ctl", "-D", str(self.data), "-l", str(folder / "server.log"), "-w", "-t", "120", "-o",
                        f"-k {folder} -c listen_addresses='' -c fsync=off -c max_connections=60", "start")

    def _as_server(self, tool: str, *args: str) -> None:
        subprocess.run(["runuser", "-u", SERVER_USER, "--", str(self.bin / tool), *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.folder, timeout=180)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SERVER_USER}@/{database}?host={self.folder}"

    def new_database(self) -> str:
        """A URL of a database no test has used yet."""
        import psycopg

        name = f"history_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def password_role(self, name: str, password: str) -> str:
        """A role that must give `password` (SCRAM; every other role keeps trust), and a URL of a fresh database
        as that role, without its password."""
        import psycopg
        from psycopg import sql

        database = self.new_database()
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name),
                                                                                   sql.Literal(password)))
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"local all {name} scram-sha-256\n" + hba.read_text())
        self._as_server("pg_ctl", "-D", str(self.data), "reload")
        return database.replace(f"//{SERVER_USER}@", f"//{name}@", 1)

    def stop(self) -> None:
        self._as_server("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop_quietly(self) -> None:
        """Stopped, whether or not it still runs (a test may have stopped it already)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()


@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[Path]:
    """`folder` read-only for the block, as a read-only mount is: a read-only bind mount of it as root
    (root writes through file modes), its modes without write permission otherwise."""
    if os.geteuid() != 0:
        modes = {path: path.stat().st_mode for path in (folder, *folder.iterdir())}
        for path, mode in modes.items():
            path.chmod(mode & ~0o222)
        try:
            yield folder
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True, capture_output=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that takes connections and never answers: a server that hangs."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def sqlite_store_with_run(path: Path, run: Path) -> Path:
    """An SQLite history holding `run`, written through the store's own interface."""
    from nccl_bench.history.address import parse_address
    from nccl_bench.history.records import read_record
    from nccl_bench.history.store import open_store

    with open_store(parse_address(str(path))) as store:
        store.add_run(read_record(run, "RUN", "2026-03-01T00:00:00+00:00"))
    return path


def history_cli(folder: Path, store: str, *args: str) -> subprocess.CompletedProcess:
    """`nccl-bench history ARGS --history STORE` run in `folder`, at COLUMNS=200."""
    from tests.helpers.launch import run_cli

    return run_cli(["history", *args, "--history", store], cwd=folder, env={"COLUMNS": "200"}, timeout=120)


def bulk_sqlite_store(path: Path, starts: list[str], accepted: tuple[int, ...] = ()) -> Path:
    """An SQLite history of one system's two all_reduce series (64K and 1M) with a run at each of `starts`
    (ISO 8601 times, oldest first), written in bulk through the store's own schema, as thousands of runs
    added one by one would take minutes; the runs whose indexes are in `accepted` accepted as the new normal."""
    from nccl_bench.history.address import parse_address
    from nccl_bench.history.store import open_store
    from nccl_bench.history.store_schema import SERIES_COLUMNS, series_id

    keys = [("all_reduce", "in_place", size, "float32", 2, 1, "gloo", "cpu@vm", "") for size in (65536, 1 << 20)]
    columns = ", ".join(SERIES_COLUMNS)
    run_ids = [f"{index:032x}" for index in range(len(starts))]
    with open_store(parse_address(str(path))) as store, store.transaction():
        store.executemany(f"INSERT INTO series (series, {columns}) VALUES ({', '.join('?' * (len(keys[0]) + 1))})",
                          [(series_id(key), *key) for key in keys])
        store.executemany("INSERT INTO runs (run_id, kind, status, started_utc, recorded_utc, source, system, "
                          "backend, world_size, nodes, verdict, meta) VALUES (?, 'sweep', 'complete', ?, ?, '', "
                          "'cpu@vm', 'gloo', 2, 1, '', '{}')",
                          [(run_id, start, start) for run_id, start in zip(run_ids, starts, strict=True)])
        store.executemany(
            f"INSERT INTO results (run_id, series, {columns}, started_utc, usable, busbw_gbps, time_us, noise) "
            f"VALUES ({', '.join('?' * (len(SERIES_COLUMNS) + 7))})",
            [(run_id, series_id(key), *key, start, 1, 1.0 + 0.01 * (index % 3), key[2] / 1e3, 0.01)
             for index, (run_id, start) in enumerate(zip(run_ids, starts, strict=True)) for key in keys])
        store.executemany("INSERT INTO accepts (series, run_id, started_utc, reason, accepted_utc) VALUES "
                          "(?, ?, ?, 'new normal', ?)",
                          [(series_id(key), run_ids[index], starts[index], starts[index]) for index in accepted
                           for key in keys])
    return path
