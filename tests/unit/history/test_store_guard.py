"""What the history lets in and out: only finite, non-negative measurements (a store holding others
keeps them, the readers skip them), host names as DNS compares them, text with its control
characters escaped, no password in what it keeps; a store of the schema before is brought up to date.
The same tests on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.history.address import parse_address
from nccl_bench.history.hosts import host_records
from nccl_bench.history.records import read_record
from nccl_bench.history.store import open_store
from nccl_bench.history.store_schema import MIGRATIONS, SCHEMA_VERSION
from nccl_bench.history.stored_values import refuse_bad_values
from tests.helpers.history_runs import doctor_run, sweep_run


def _record(folder, day=1, **changes):
    record = read_record(sweep_run(folder, day), "RUN", "2026-03-01T00:00:00+00:00")
    return dataclasses.replace(record, **changes) if changes else record


@pytest.mark.parametrize("busbw", [math.inf, -math.inf, math.nan, -1.0, 1e308])
def test_a_run_with_a_value_that_is_no_measurement_is_never_stored(store_url, tmp_path, busbw):
    good = _record(tmp_path / "r")
    bad = dataclasses.replace(good, values=(dataclasses.replace(good.values[0], busbw_gbps=busbw), *good.values[1:]))
    with pytest.raises(UserInputError, match=r"busbw_gbps .* of all_reduce in_place 65536 float is not a measurement"):
        refuse_bad_values(bad)
    with open_store(parse_address(store_url)) as store:
        with pytest.raises(UserInputError):
            store.add_run(bad)
        assert store.run_count() == 0


def test_values_already_bad_in_a_store_are_skipped_and_counted(store_url, tmp_path):
    with open_store(parse_address(store_url)) as store:
        for day in (1, 2):
            store.add_run(_record(tmp_path / f"r{day}", day))
        bad = ["'Infinity'", "'-Infinity'", "'NaN'", "-1"] if store.postgres else ["9e999", "-9e999", "-1"]
        for number, value in enumerate(bad):  # written by hand, or by a tool that let them in
            store.execute(f"UPDATE results SET busbw_gbps = {value} WHERE run_id = ? AND series LIKE ?",
                          (store.one("SELECT run_id FROM runs ORDER BY started_utc LIMIT 1")[0]
                           if number % 2 else store.one("SELECT run_id FROM runs ORDER BY started_utc DESC LIMIT 1")[0],
                           "%65536%" if number < 2 else "%1048576%"))
        aggregates = list(store.series_aggregates(None))
        windows = list(store.series_windows(None, 20))
        assert store.unusable_values() == min(len(bad), 4)
    assert all(math.isfinite(low) and math.isfinite(high) and low >= 0 for *_, low, high in aggregates)
    assert all(math.isfinite(busbw) and busbw >= 0 for *_, busbw in windows)


def test_host_names_are_one_host_whatever_their_case_or_trailing_dot(store_url, tmp_path):
    with open_store(parse_address(store_url)) as store:
        store.add_run(read_record(doctor_run(tmp_path / "d1", 1, hosts=("node1", "b")), "RUN", ""))
        store.add_run(read_record(doctor_run(tmp_path / "d2", 2, hosts=("Node1", "b"), suspects=[("node", ["Node1"])]),
                                  "RUN", ""))
        store.add_run(read_record(doctor_run(tmp_path / "d3", 3, hosts=("node1.", "B.")), "RUN", ""))
        hosts = {h.host: (h.runs, h.flagged, h.kinds) for h in host_records(store)}
    assert hosts == {"node1": (3, 1, {"node": 1}), "b": (3, 0, {})}


def test_text_from_the_store_comes_out_with_its_control_characters_escaped(store_url, tmp_path):
    with open_store(parse_address(store_url)) as store:
        store.add_run(read_record(doctor_run(tmp_path / "d1", 1, hosts=("evil\x1b[2J\nhost\x07", "b")), "RUN", ""))
        hostile = "vm\x1b]0;owned\x07"  # a host name that would retitle the terminal
        store.add_run(read_record(sweep_run(tmp_path / "r", 1, hosts=(hostile, hostile)), "RUN", ""))
        hosts = sorted(h.host for h in host_records(store))
        systems = {row[8] for row in store.series_aggregates(None)}
    assert hosts == ["b", "evil\\x1b[2j\\x0ahost\\x07", "vm\\x1b]0;owned\\x07"]  # the doctor's hosts, then the sweep's
    assert systems == {"cpu@vm\\x1b]0;owned\\x07"}


def test_no_password_is_kept_in_the_store(store_url, tmp_path):
    record = _record(tmp_path / "r")
    meta = {**record.meta, "command_line": ["nccl-bench", "sweep", "--history", "postgresql://ci:s3cret@db/bench",
                                            "--history=host=db password='s3 cret' dbname=b"]}
    with open_store(parse_address(store_url)) as store:
        store.add_run(dataclasses.replace(record, meta=meta))
        [kept] = store.one("SELECT meta FROM runs")
    assert "s3" not in kept and "cret" not in kept
    assert json.loads(kept)["command_line"][3] == "postgresql://ci:***@db/bench"


def test_a_store_of_the_schema_before_is_brought_up_to_date(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:  # a store as the tool before this schema left it
        for statement in MIGRATIONS[1]:
            connection.execute(statement)
        connection.execute("INSERT INTO store_info VALUES ('schema_version', '1')")
    connection.close()
    with open_store(parse_address(str(path))) as store:
        assert store.version() == SCHEMA_VERSION
        assert store.add_run(_record(tmp_path / "r")) is True
        assert [s[0] for s in store.series_aggregates(None)]
