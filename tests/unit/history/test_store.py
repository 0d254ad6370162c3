"""The store behind its one interface, the same tests on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import pytest

from nccl_bench.history import rule, series
from nccl_bench.history.address import parse_address
from nccl_bench.history.hosts import host_records
from nccl_bench.history.records import read_record, system_of
from nccl_bench.history.store import StoreError, open_store
from tests.helpers.history_runs import doctor_run, late_host_run, sweep_run


def _add(store, folder):
    return store.add_run(read_record(folder, "RUN", "2026-03-01T00:00:00+00:00"))


def _summaries(store, window=20, floor=0.03):
    return series.in_order(series.summaries(store, series.Asked(None, None, window, floor), aggregates=True))


def test_a_run_added_twice_is_stored_once(store_url, tmp_path):
    run = sweep_run(tmp_path / "r1", 1)
    with open_store(parse_address(store_url)) as store:
        assert _add(store, run) is True
        assert _add(store, run) is False
        assert _add(store, run / "results.csv") is False  # its CSV is the same run
        assert store.run_count() == 1
        assert [s.runs for s in _summaries(store)] == [1, 1]


def test_half_the_bandwidth_regresses_and_names_the_series(store_url, tmp_path):
    with open_store(parse_address(store_url)) as store:
        for day, scale in ((1, 1.0), (2, 1.01), (3, 0.99), (4, 0.5)):
            _add(store, sweep_run(tmp_path / f"r{day}", day, scale))
        found = _summaries(store)
    assert [(s.key["size_bytes"], s.verdict.status) for s in found] == [(65536, rule.REGRESSION),
                                                                        (1048576, rule.REGRESSION)]
    big = found[1]
    assert (big.runs, big.latest.busbw_gbps, big.min_gbps, big.max_gbps) == (4, pytest.approx(5.0),
                                                                             pytest.approx(5.0), pytest.approx(10.1))
    assert big.verdict.median_gbps == pytest.approx(10.0)
    assert "all_reduce in_place 1M float32" not in series.describe(big)  # the rows' dtype is "float"
    assert series.describe(big).startswith("all_reduce in_place 1M float on cpu@vm (2 ranks, 1 node(s), gloo)")


def test_runs_of_another_system_or_failed_runs_never_join_a_series(store_url, tmp_path):
    with open_store(parse_address(store_url)) as store:
        for day in (1, 2, 3, 4):
            _add(store, sweep_run(tmp_path / f"r{day}", day))
        _add(store, sweep_run(tmp_path / "other", 5, 0.5, hosts=("big", "big")))
        _add(store, sweep_run(tmp_path / "failed", 6, 0.1, status="failed"))
        found = _summaries(store)
        assert store.run_count() == 6
    assert {(s.key["system"], s.runs, s.verdict.status) for s in found} == {
        ("cpu@vm", 4, rule.OK), ("cpu@big", 1, rule.TOO_FEW)}


def test_a_store_of_a_newer_schema_is_refused(store_url):
    address = parse_address(store_url)
    with open_store(address) as store:
        store.execute("UPDATE store_info SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(StoreError, match=r"written by a newer nccl-bench \(store schema 99; this one reads up to 4\)"):
        open_store(address)


def test_doctor_runs_give_each_host_its_record(store_url, tmp_path):
    with open_store(parse_address(store_url)) as store:
        _add(store, doctor_run(tmp_path / "d1", 1, suspects=[("node", ["c"])]))
        _add(store, doctor_run(tmp_path / "d2", 2, suspects=[("node", ["c"]), ("link", ["b", "c"])]))
        _add(store, doctor_run(tmp_path / "d3", 3))
        hosts = {h.host: h for h in host_records(store)}
    assert {name: (h.runs, h.flagged) for name, h in hosts.items()} == {"a": (3, 0), "b": (3, 1), "c": (3, 2)}
    assert hosts["c"].kinds == {"link": 1, "node": 2}
    assert hosts["c"].last_flagged_utc == "2026-02-02T00:00:00+00:00"
    assert hosts["a"].last_flagged_utc is None


def test_each_host_counts_the_rows_that_named_it_late(store_url, tmp_path):
    """nodeb late in both rows of the first run (200 and 300 us), in one of the second (250 us), in none of
    the third: 3 of its 6 rows, median 250 us; the others took part in 6 rows and were late in none."""
    with open_store(parse_address(store_url)) as store:
        for day, late_us in ((1, (200.0, 300.0)), (2, (250.0,)), (3, ())):
            _add(store, late_host_run(tmp_path / f"r{day}", day, late_us))
        hosts = {h.host: (h.rows, h.late_rows, h.late_median_us) for h in host_records(store)}
    assert hosts == {"nodea": (6, 0, None), "nodeb": (6, 3, 250.0), "nodec": (6, 0, None)}


def test_a_split_groups_row_counts_only_its_groups_hosts_and_a_skipped_row_none():
    from nccl_bench.history.records import HostRows, host_rows
    from nccl_bench.results.schema import STATUS_UNSUPPORTED
    from tests.helpers.rows import row

    rows = [row(group="node a"), row(group="node b", late_host="b", late_us=5.0), row(), row(status=STATUS_UNSUPPORTED)]
    assert host_rows(rows, ["a", "a", "b", "b"]) == (HostRows("a", 2, ()), HostRows("b", 2, (5.0,)))


def test_a_store_of_schema_2_is_migrated_and_keeps_its_runs(store_url, tmp_path):
    """A store written before the rows' hosts were kept: its runs stay, and count no rows for any host."""
    from nccl_bench.history.store_schema import MIGRATIONS

    address = parse_address(store_url)
    with open_store(address) as store:
        assert _add(store, doctor_run(tmp_path / "d1", 1, suspects=[("node", ["c"])]))
        for table in ("row_hosts", "late_rows"):  # as schema 2 left it
            store.execute(f"DROP TABLE {table}")
        store.execute("UPDATE store_info SET value = '2' WHERE name = 'schema_version'")
    with open_store(address) as store:
        assert store.version() == max(MIGRATIONS)
        _add(store, late_host_run(tmp_path / "r1", 1, (120.0,)))
        hosts = {h.host: (h.runs, h.flagged, h.rows, h.late_rows) for h in host_records(store)}
    assert hosts == {"a": (1, 0, 0, 0), "b": (1, 0, 0, 0), "c": (1, 1, 0, 0), "nodea": (0, 0, 2, 0),
                     "nodeb": (0, 0, 2, 1), "nodec": (0, 0, 2, 0)}


def test_an_unreachable_store_is_one_line():
    with pytest.raises(StoreError, match=r"^postgresql://nobody@/x\?host=/nonexistent-socket-dir: "):
        open_store(parse_address("postgresql://nobody@/x?host=/nonexistent-socket-dir"))


@pytest.mark.parametrize("meta,expected", [
    (None, "unknown"),
    ({"devices": ["cpu: X", "cpu: X"], "hostnames": ["n2", "n1"]}, "cpu@n[1-2]"),
    ({"devices": ["NVIDIA H100 80GB HBM3"] * 16, "hostnames": ["a"] * 8 + ["b"] * 8, "nodes": 2},
     "NVIDIA H100 80GB HBM3 x8"),
])
def test_the_system_of_a_run(meta, expected):
    assert system_of(meta) == expected


def test_an_edited_copy_is_a_run_of_its_own(tmp_path):
    first = read_record(sweep_run(tmp_path / "a", 1), "RUN", "")
    same = read_record(sweep_run(tmp_path / "b", 1), "RUN", "")
    edited = read_record(sweep_run(tmp_path / "c", 1, 0.5), "RUN", "")
    assert first.run_id == same.run_id != edited.run_id


def test_a_lasting_drop_is_named_with_the_run_it_started_with(tmp_path):
    with open_store(parse_address(str(tmp_path / "h.sqlite"))) as store:
        for day, scale in ((1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0), (5, 0.5), (6, 0.5)):
            _add(store, sweep_run(tmp_path / f"r{day}", day, scale))
        big = _summaries(store)[1]
    step = big.verdict.step_start
    assert (big.verdict.status, step.started_utc, big.verdict.step_runs) == (rule.REGRESSION,
                                                                             "2026-01-05T00:00:00+00:00", 2)
    assert (f"; a lasting change over 2 runs, never accepted, starting with run {step.run_id[:12]} "
            "(2026-01-05T00:00:00+00:00)") in series.describe(big)


def test_text_an_older_tool_stored_raw_is_escaped_once_and_its_series_merged(store_url, tmp_path):
    """A store of schema 2 as the tool before escaping left it: a run's system, series and results, and a
    doctor run's host, hold a raw ESC, beside a later run of the same host stored escaped. Opened, every
    text is escaped, the two forms of each series are one, and every reader counts every run."""
    from nccl_bench.history.store_schema import SERIES_COLUMNS

    hostile = "vm\x1b[31mred"
    address = parse_address(store_url)
    with open_store(address) as store:
        for day, hosts in ((1, ("vm", "vm")), (2, (hostile, hostile)), (3, (hostile, hostile))):
            _add(store, sweep_run(tmp_path / f"r{day}", day, hosts=hosts))
        _add(store, doctor_run(tmp_path / "d", 4, hosts=(hostile, "b"), suspects=[("node", [hostile])]))
        [(raw_run,)] = store.rows("SELECT run_id FROM runs WHERE started_utc = ?", ("2026-01-02T00:00:00+00:00",))
        escaped = "cpu@vm\\x1b[31mred"
        columns = ", ".join(SERIES_COLUMNS)
        for series_key, *key in list(store.rows(f"SELECT series, {columns} FROM series WHERE system = ?",
                                                (escaped,))):
            raw_key = [hostile.join(part.split("vm\\x1b[31mred")) if isinstance(part, str) else part for part in key]
            raw_series = series_key.replace(escaped, "cpu@" + hostile)
            store.execute(f"INSERT INTO series (series, {columns}) VALUES ({', '.join('?' * (len(key) + 1))})",
                          (raw_series, *raw_key))
            store.execute("UPDATE results SET series = ?, system = ? WHERE run_id = ? AND series = ?",
                          (raw_series, "cpu@" + hostile, raw_run, series_key))
        store.execute("UPDATE runs SET system = ? WHERE run_id = ?", ("cpu@" + hostile, raw_run))
        for table in ("doctor_hosts", "doctor_flags"):
            store.execute(f"UPDATE {table} SET host = ? WHERE host = ?", (hostile, "vm\\x1b[31mred"))
        store.execute("UPDATE store_info SET value = '2' WHERE name = 'schema_version'")
    with open_store(address) as store:
        raw_text = [row for table in ("runs", "results", "series", "doctor_hosts", "doctor_flags")
                    for row in store.execute(f"SELECT * FROM {table}").fetchall() if any("\x1b" in str(v) for v in row)]
        assert raw_text == []
        assert sorted((s.key["system"], s.runs) for s in _summaries(store)) == [
            ("cpu@vm", 1), ("cpu@vm", 1), (escaped, 2), (escaped, 2)]
        # the doctor's hosts (the sweeps' hosts are listed too, with their rows and no doctor run)
        assert [(h.host, h.flagged) for h in host_records(store) if h.runs] == [("b", 0), ("vm\\x1b[31mred", 1)]
