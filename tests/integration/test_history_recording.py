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

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta, write_meta
from tests.conftest import run_cli, worker_env
from tests.result_rows import write_run

pytestmark = pytest.mark.integration

TINY_SWEEP = ["sweep", "--workers", "2", "--sizes", "1M", "--trials", "3", "--min-sample-ms", "50", "-w", "2"]


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
        assert f"recorded in the history {store}\n" in done.stderr
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
    said = [line for line in done.stderr.splitlines() if line.startswith("recorded in the history ")]
    assert said == [f"recorded in the history {url}"]
    shown = json.loads(_history(tmp_path, url, "show", "--json").stdout)
    assert shown["runs"] == 1 and [s["runs"] for s in shown["series"]] == [1]
