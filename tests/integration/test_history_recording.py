"""Real sweeps record themselves: three into an SQLite store, one into a real PostgreSQL server; a copy of
the last with its rows edited to half the bandwidth, added twice, is stored once.

Whether a halved run is flagged depends on the spread of the history (the rule is noise-aware), and on
this shared 2-core host three real sweeps can spread by 2x; the verdict on a controlled history is
tests/cli/test_history_cli.py's. Here: what the commands record, and that an unchanged history passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_bench.history.records import read_record
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta, write_meta
from tests.helpers.launch import run_cli, worker_env
from tests.helpers.rows import write_run

pytestmark = pytest.mark.integration

TINY_SWEEP = ["sweep", "--no-plot",
              "--workers", "2", "--sizes", "1M", "--trials", "3", "--min-sample-ms", "50", "-w", "2"]


def _sweep(tmp_path: Path, name: str, *extra: str, env: dict | None = None):
    done = run_cli([*TINY_SWEEP, "--out", str(tmp_path / name), *extra], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done


def _history(tmp_path: Path, store: str, *args: str):
    return run_cli(["history", *args, "--history", store], cwd=tmp_path, env=worker_env())


def test_three_sweeps_record_themselves_and_a_halved_copy_is_stored_once(tmp_path):
    store = str(tmp_path / "fleet.sqlite")
    for name in ("r1", "r2"):  # the store from the environment, as a CI job would set it
        done = _sweep(tmp_path, name, env={"NCCL_BENCH_HISTORY": store})
        run_id = read_record(tmp_path / name, "RUN", "").run_id
        assert f"recorded run {run_id[:12]} in the history {store}\n" in done.stderr  # what check --run takes
    _sweep(tmp_path, "r3", "--history", store)
    shown = json.loads(_history(tmp_path, store, "show", "--json").stdout)
    [series] = shown["series"]
    assert (shown["runs"], series["runs"], series["op"], series["size_bytes"]) == (3, 3, "all_reduce", 2**20)
    assert series["system"].startswith("cpu@") and series["world_size"] == 2
    assert _history(tmp_path, store, "check").returncode == 0

    half = tmp_path / "half"
    write_run(half, [r.__class__(**{**r.__dict__, "busbw_gbps": r.busbw_gbps / 2})
                     for r in read_rows(tmp_path / "r3" / "results.csv")])
    meta = read_meta(tmp_path / "r3")
    write_meta(half, {**meta, "started_utc": meta["ended_utc"]})  # it ran after r3
    for _ in range(2):
        assert _history(tmp_path, store, "add", str(half)).returncode == 0
    shown = json.loads(_history(tmp_path, store, "show", "--json").stdout)
    [series] = shown["series"]
    assert (shown["runs"], series["runs"]) == (4, 4)
    r3 = read_rows(tmp_path / "r3" / "results.csv")[0].busbw_gbps
    assert series["latest_busbw_gbps"] == pytest.approx(r3 / 2)


def test_a_sweep_records_itself_into_postgresql(tmp_path, postgres_server):
    url = postgres_server.new_database()
    done = _sweep(tmp_path, "run", "--history", url)
    said = [line for line in done.stderr.splitlines() if line.startswith("recorded run ")]
    assert said == [f"recorded run {read_record(tmp_path / 'run', 'RUN', '').run_id[:12]} in the history {url}"]
    shown = json.loads(_history(tmp_path, url, "show", "--json").stdout)
    assert shown["runs"] == 1 and [s["runs"] for s in shown["series"]] == [1]


def _locked_sqlite(path: Path):
    """Another writer's exclusive lock on a rollback-journal store, held until closed."""
    import sqlite3

    from nccl_bench.history.address import parse_address
    from nccl_bench.history.store import open_store

    open_store(parse_address(str(path))).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def _add_later_line(run: Path, where: str) -> str:
    return f"add it later with `nccl-bench history add {run} --history {where}`"


@pytest.mark.xdist_group("timing")
def test_a_sweep_whose_sqlite_history_is_locked_ends_with_its_own_code_and_the_add_later_line(tmp_path):
    import time

    store = tmp_path / "locked.sqlite"
    holder = _locked_sqlite(store)
    try:
        done = run_cli([*TINY_SWEEP, "--out", str(tmp_path / "run"), "--history", str(store), "--history-wait", "3"],
                       cwd=tmp_path)
        ended = time.time()
    finally:
        holder.close()
    assert done.returncode == 0, done.stderr
    assert ended - (tmp_path / "run" / "results.csv").stat().st_mtime < 60  # within a minute of its last row
    [warning] = [line for line in done.stderr.splitlines() if "not recorded" in line]
    assert warning == (f"nccl-bench: warning: the run was not recorded in the history ({store}: locked by another "
                       "writer; gave up after 3 s (--history-wait sets how long)); it is whole in "
                       f"{tmp_path / 'run'}: " + _add_later_line(tmp_path / "run", str(store)))
    assert f"nccl-bench: waiting for the history {store}: locked by another writer, or busy" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.xdist_group("timing")
def test_a_sweep_whose_postgresql_history_is_locked_ends_with_its_own_code(tmp_path, postgres_server):
    import psycopg

    url = postgres_server.new_database()
    run_cli(["history", "nodes", "--history", url], cwd=tmp_path)  # the store made, then locked
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE runs")
        done = run_cli([*TINY_SWEEP, "--out", str(tmp_path / "run"), "--history", url, "--history-wait", "5"],
                       cwd=tmp_path)
        holder.rollback()
    assert done.returncode == 0, done.stderr
    [warning] = [line for line in done.stderr.splitlines() if "not recorded" in line]
    assert warning.startswith(f"nccl-bench: warning: the run was not recorded in the history ({url}: locked by "
                              "another writer; gave up after 5 s")
    assert warning.endswith(_add_later_line(tmp_path / "run", "URL"))


@pytest.mark.xdist_group("signals")
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_while_a_sweep_waits_for_its_history_ends_at_once_saying_how_to_add_it(
        tmp_path, signal_name):
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers.launch import REPO

    store = tmp_path / "locked.sqlite"
    holder = _locked_sqlite(store)
    command = [sys.executable, "-m", "nccl_bench", *TINY_SWEEP, "--out", str(tmp_path / "run"), "--history",
               str(store), "--history-wait", "300"]
    try:
        process = subprocess.Popen(command, cwd=tmp_path, env=worker_env({"PYTHONPATH": str(REPO)}),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in process.stderr:  # the sweep runs, finishes, then waits for the history and says so
            seen.append(line)
            if line.startswith("nccl-bench: waiting for the history "):
                break
        sent = time.monotonic()
        process.send_signal(getattr(signal, signal_name))
        rest = process.communicate(timeout=60)[1]
        assert time.monotonic() - sent < 30, "".join(seen) + rest
    finally:
        holder.close()
    assert process.returncode == 130, "".join(seen) + rest
    assert rest.splitlines() == [
        f"nccl-bench: error: interrupted by {signal_name} while recording the run: it was not recorded in the "
        f"history; it is whole in {tmp_path / 'run'}: " + _add_later_line(tmp_path / "run", str(store))]
    assert read_meta(tmp_path / "run")["status"] == "complete"


@pytest.mark.parametrize("form", ["url", "keywords"])
def test_no_password_reaches_a_file_or_a_message_of_a_run_recorded_through_one(tmp_path, postgres_server, form):
    """The test server trusts its socket, so the password is given and never needed: it must appear nowhere."""
    import subprocess

    url = postgres_server.new_database()
    database, folder = url.split("@/", 1)[1].split("?host=")
    secret = "Pa55-w0rd-" + form
    given = (f"postgresql://postgres:{secret}@/{database}?host={folder}&password={secret}" if form == "url"
             else f"host={folder} dbname={database} user=postgres password={secret}")
    done = _sweep(tmp_path, "run", "--history", given, env={"PGPASSWORD": secret + "-env"})
    assert secret not in done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("recorded run ")]
    found = subprocess.run(["grep", "-r", "-l", secret, str(tmp_path)], capture_output=True, text=True)
    assert found.stdout == ""  # not in meta.json's command line or env, results.csv, nor anywhere else
    shown = _history(tmp_path, url, "show", "--json")
    assert json.loads(shown.stdout)["runs"] == 1
    import psycopg

    with psycopg.connect(url) as connection:
        [[meta]] = connection.execute("SELECT meta FROM runs").fetchall()
    assert secret not in meta and "command_line" in json.loads(meta)


def test_a_stale_claim_of_a_killed_run_is_taken_over_by_the_next_run_with_its_out(tmp_path):
    """A run SIGKILLed after it claimed its folder and before it wrote anything leaves only .claim."""
    import subprocess
    import sys

    from tests.helpers.launch import REPO

    out = tmp_path / "run"
    claim = ("import os, signal; from nccl_bench.results.run_folder import claim_run_dir; "
             f"claim_run_dir({str(out)!r}, '--out', 'killed run'); os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", claim], env=worker_env({"PYTHONPATH": str(REPO)}), timeout=60)
    assert killed.returncode == -9 and [p.name for p in out.iterdir()] == [".claim"]
    done = _sweep(tmp_path, "run")
    [note] = [line for line in done.stderr.splitlines() if ".claim" in line or "claimed by a run" in line]
    assert note.startswith(f"nccl-bench: warning: {out} was claimed by a run that is gone (pid ")
    assert note.endswith(" is dead); this run takes it")
    assert read_meta(out)["status"] == "complete"
