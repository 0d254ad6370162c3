"""`nccl-bench history` as a user runs it: exit codes, the lines it prints, the files it writes, on SQLite
and on a real PostgreSQL server; concurrent writers; a store that cannot be reached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_bench.cli import on_ranks
from nccl_bench.history import recording
from nccl_bench.history.address import parse_address
from nccl_bench.history.records import read_record
from nccl_bench.render import history_page
from tests.helpers.forked_cli import run_forked
from tests.helpers.history_runs import doctor_run, late_host_run, one_rank_run, sweep_run
from tests.helpers.history_stores import history_cli
from tests.helpers.launch import worker_env

SERIES_KEYS = {"op", "placement", "size_bytes", "dtype", "world_size", "nodes", "backend", "system", "runs",
               "latest_busbw_gbps", "median_busbw_gbps", "min_busbw_gbps", "max_busbw_gbps", "change_pct"}


def test_three_steady_runs_pass_and_half_the_bandwidth_added_twice_fails(store_url, tmp_path):
    runs = [sweep_run(tmp_path / f"r{day}", day, scale) for day, scale in ((1, 1.0), (2, 0.99), (3, 1.01))]
    added = history_cli(tmp_path, store_url, "add", *map(str, runs))
    assert added.returncode == 0, added.stderr
    assert history_cli(tmp_path, store_url, "check").returncode == 0
    half = sweep_run(tmp_path / "half", 4, 0.5)
    for _ in range(2):
        assert history_cli(tmp_path, store_url, "add", str(half)).returncode == 0
    shown = json.loads(history_cli(tmp_path, store_url, "show", "--json").stdout)
    assert shown["runs"] == 4
    assert all(SERIES_KEYS <= set(series) and series["runs"] == 4 for series in shown["series"])
    checked = history_cli(tmp_path, store_url, "check", "--markdown", "check.md", "--junit", "check.xml")
    assert checked.returncode == 1, checked.stderr
    assert "nccl-bench: error: regression: all_reduce in_place 1M float on cpu@vm" in checked.stderr
    assert "2 regression(s) in 2 series" in checked.stdout  # the report; its errors on stderr
    assert "regression(s)" not in checked.stderr
    assert "| all_reduce | 1M | cpu@vm |" in (tmp_path / "check.md").read_text()
    assert 'failures="2"' in (tmp_path / "check.xml").read_text()


def test_a_one_rank_history_is_read_by_every_reader_and_judged_on_algbw(tmp_path):
    """busbw is 0 at one rank for an (n-1)/n op: every reader works (no log of 0), and the check judges the
    runs by algbw, so a run at half the speed is still a regression."""
    store = str(tmp_path / "h.sqlite")
    runs = [one_rank_run(tmp_path / f"r{day}", day, speed) for day, speed in ((1, 1.0), (2, 0.99), (3, 1.01), (4, 1.0))]
    assert history_cli(tmp_path, store, "add", *map(str, runs)).returncode == 0
    for argv in (["show"], ["show", "--json"], ["check"], ["check", "--json"], ["html", str(tmp_path / "h.html")]):
        done = history_cli(tmp_path, store, *argv)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
    shown = json.loads(history_cli(tmp_path, store, "show", "--json").stdout)
    assert {(s["figure"], s["verdict"]) for s in shown["series"]} == {("algbw", "ok")}
    assert sorted(s["latest_busbw_gbps"] for s in shown["series"]) == pytest.approx([1.0, 10.0])
    for series in shown["series"]:  # the range is of the judged figure too, never the busbw of 0
        latest = series["latest_busbw_gbps"]  # the last run ran at speed 1.0, the others at 0.99 and 1.01
        assert (series["min_busbw_gbps"], series["max_busbw_gbps"]) == pytest.approx((0.99 * latest, 1.01 * latest),
                                                                                      rel=1e-3)
    half = one_rank_run(tmp_path / "half", 5, 0.5)
    assert history_cli(tmp_path, store, "add", str(half)).returncode == 0
    checked = history_cli(tmp_path, store, "check")
    assert checked.returncode == 1, checked.stderr
    assert "judged on algbw, busbw being 0 at one rank" in checked.stderr
    assert "2 regression(s) in 2 series" in checked.stdout
    first, last = (read_record(run, "RUN", "").run_id for run in (runs[0], half))
    diffed = history_cli(tmp_path, store, "diff", first, last, "--json")
    assert diffed.returncode == 0, diffed.stderr
    assert "Traceback" not in diffed.stderr and json.loads(diffed.stdout)


@pytest.mark.parametrize("narrowing,named", [(["--system", "cpu@vn"], "--system"), (["--op", "all_gather"], "--op"),
                                              ([], "--history")])
def test_a_check_that_names_no_series_fails_and_lists_what_is_stored(tmp_path, narrowing, named):
    """A typo in a CI job's --system must not turn the gate off: exit 2, one line, what the store holds."""
    store = str(tmp_path / "h.sqlite")
    if narrowing:
        assert history_cli(tmp_path, store, "add", str(sweep_run(tmp_path / "r1", 1))).returncode == 0
    else:
        history_cli(tmp_path, store, "add", str(doctor_run(tmp_path / "d", 1)))  # a store with no series
    checked = history_cli(tmp_path, store, "check", *narrowing, "--junit", str(tmp_path / "c.xml"))
    assert checked.returncode == 2, checked.stderr
    assert checked.stderr.count("\n") == 1 and checked.stderr.startswith(f"nccl-bench: error: {named}: no series")
    held = "2 series of system(s) cpu@vm and op(s) all_reduce" if narrowing else "no series yet"
    assert held in checked.stderr


def test_show_and_nodes_print_tables(tmp_path):
    store = str(tmp_path / "h.sqlite")
    history_cli(tmp_path, store, "add", str(sweep_run(tmp_path / "r1", 1)), str(doctor_run(tmp_path / "d", 1)))
    shown = history_cli(tmp_path, store, "show", "--op", "all_reduce")
    assert shown.returncode == 0 and "too few runs" in shown.stdout and "cpu@vm" in shown.stdout
    nodes = json.loads(history_cli(tmp_path, store, "nodes", "--json").stdout)
    assert nodes == {"hosts": [{"host": h, "runs": 1, "flagged": 0, "kinds": {}, "last_flagged_utc": None,
                                "rows": 0, "late_rows": 0, "late_median_us": None} for h in "abc"]
                     + [{"host": "vm", "runs": 0, "flagged": 0, "kinds": {}, "last_flagged_utc": None, "rows": 2,
                         "late_rows": 0, "late_median_us": None}]}


def test_nodes_counts_each_hosts_late_rows(tmp_path):
    """Three sweeps of nodea, nodeb and nodec; nodeb named late in two of them (both rows of the first, at 200
    and 300 us, one of the second at 250 us): 3 of its 6 rows, median 250 us; nobody else late."""
    store = str(tmp_path / "h.sqlite")
    runs = [late_host_run(tmp_path / f"r{day}", day, late) for day, late in ((1, (200, 300)), (2, (250,)), (3, ()))]
    assert history_cli(tmp_path, store, "add", *map(str, runs)).returncode == 0
    shown = history_cli(tmp_path, store, "nodes")
    assert shown.returncode == 0, shown.stderr
    table = {line.split()[0]: line.split()[-2:] for line in shown.stdout.splitlines()[1:]}
    assert shown.stdout.splitlines()[0].split()[-5:] == ["late", "rows", "late", "median", "(us)"]
    assert table == {"nodea": ["0/6", "-"], "nodeb": ["3/6", "250.0"], "nodec": ["0/6", "-"]}
    hosts = json.loads(history_cli(tmp_path, store, "nodes", "--json").stdout)["hosts"]
    assert [(h["host"], h["rows"], h["late_rows"], h["late_median_us"]) for h in hosts] == [
        ("nodea", 6, 0, None), ("nodeb", 6, 3, 250.0), ("nodec", 6, 0, None)]


def test_seven_concurrent_adds_into_a_new_store_keep_all_seven(store_url, tmp_path):
    runs = [sweep_run(tmp_path / f"r{day}", day, 1 + day / 100) for day in range(1, 8)]
    argv = [sys.executable, "-m", "nccl_bench", "history", "add", "--history", store_url]
    adds = [subprocess.Popen([*argv, str(run)], cwd=tmp_path, env=worker_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for run in runs]
    results = [(add.wait(timeout=300), add.stderr.read()) for add in adds]
    assert [code for code, _ in results] == [0] * 7, results
    assert json.loads(history_cli(tmp_path, store_url, "show", "--json").stdout)["runs"] == 7


def test_an_unreachable_store_loses_no_run(tmp_path, capsys):
    run = sweep_run(tmp_path / "r1", 1)
    address = parse_address("postgresql://nobody@/x?host=/nonexistent-socket-dir")
    assert recording.record_run(run, address).failure.startswith("postgresql://")
    on_ranks.record_in_history(run, address)
    err = capsys.readouterr().err
    assert err.startswith("nccl-bench: warning: the run was not recorded in the history (postgresql://")
    assert f"add it later with `nccl-bench history add {run} --history URL`" in err
    assert (run / "results.csv").is_file()


def test_no_history_records_nothing_and_a_bad_url_fails_first(tmp_path):
    assert recording.recording_target("sqlite:/bad", True, tmp_path) is None
    assert recording.recording_target(None, False, tmp_path).target.endswith("history.sqlite")
    on_ranks.record_in_history(sweep_run(tmp_path / "r1", 1), None)
    assert not (tmp_path / "history.sqlite").exists()


def test_the_page_is_one_file_with_no_external_reference(tmp_path):
    store = str(tmp_path / "h.sqlite")
    runs = [sweep_run(tmp_path / f"r{day}", day, scale) for day, scale in ((1, 1.0), (2, 1.0), (3, 1.0), (4, 0.5))]
    hostile = doctor_run(tmp_path / "d", 1, hosts=("<script>x</script>", "b"), suspects=[("node", ["b"])])
    assert history_cli(tmp_path, store, "add", *map(str, runs), str(hostile)).returncode == 0
    made = history_cli(tmp_path, store, "html", "page.html")
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "page.html").read_text()
    assert page.count("<svg") == 2 and page.count('class="run regression"') == 2
    # one script, the page's own filter, inline; the host named <script> is text
    assert page.count("<script") == 1 and f"<script>{history_page.SCRIPT}</script>" in page
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    for reference in ("http:", "https:", "src=", "href=", "url(", "@import", "<link"):
        assert reference not in page


@pytest.mark.parametrize("args,message", [
    (["show", "--history", "mysql://db/x"], "--history: 'mysql://db/x': unknown scheme"),
    (["check", "--history", "missing.sqlite"], "--history: missing.sqlite does not exist; record a run first"),
    (["check", "--window", "1", "--history", "h.sqlite"], "--window:"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    done = run_forked(["history", *args], cwd=tmp_path, env=worker_env(), timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"nccl-bench: error: {message}") and done.stderr.count("\n") == 1


def test_nccl_bench_history_names_the_store(tmp_path):
    env = worker_env({"NCCL_BENCH_HISTORY": "sqlite://bad"})
    done = run_forked(["history", "show"], cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("nccl-bench: error: NCCL_BENCH_HISTORY: ")


def test_a_newer_store_is_refused_in_one_line(tmp_path):
    store = str(tmp_path / "h.sqlite")
    history_cli(tmp_path, store, "add", str(sweep_run(tmp_path / "r1", 1)))
    import sqlite3

    with sqlite3.connect(store) as connection:
        connection.execute("UPDATE store_info SET value = '7' WHERE name = 'schema_version'")
    done = history_cli(tmp_path, store, "show")
    assert done.returncode == 2
    assert done.stderr == (f"nccl-bench: error: --history: {store} was written by a newer nccl-bench (store schema 7; "
                           "this one reads up to 4): upgrade nccl-bench\n")



def test_a_host_flagged_in_two_doctor_runs_is_the_one_to_drain(store_url, tmp_path):
    """Two doctor runs whose verdicts (the doctor's own judge, tests/helpers/doctor_reports.py) name host c."""
    from nccl_bench.doctor.doctor_report import DoctorReport, report_json
    from nccl_bench.results.run_folder import write_meta
    from tests.helpers.doctor_reports import three_node_header, three_node_judgement
    from tests.helpers.history_runs import sweep_meta

    folders = []
    for day in (1, 2):
        folder = tmp_path / f"doctor{day}"
        folder.mkdir()
        report = DoctorReport(run_dir=folder, header=three_node_header(), judgement=three_node_judgement(), wall_s=4.0)
        (folder / "doctor.json").write_text(json.dumps(report_json(report)))
        write_meta(folder, {**sweep_meta(f"2026-02-0{day}T00:00:00+00:00", hosts=("a", "a", "b", "b", "c", "c")),
                            "command": "doctor"})
        folders.append(str(folder))
    assert history_cli(tmp_path, store_url, "add", *folders).returncode == 0
    hosts = {h["host"]: h for h in json.loads(history_cli(tmp_path, store_url, "nodes", "--json").stdout)["hosts"]}
    assert {name: (h["runs"], h["flagged"]) for name, h in hosts.items()} == {"a": (2, 0), "b": (2, 0), "c": (2, 2)}
    assert hosts["c"]["last_flagged_utc"] == "2026-02-02T00:00:00+00:00" and set(hosts["c"]["kinds"]) == {"node"}
    table = history_cli(tmp_path, store_url, "nodes").stdout
    assert "node x2" in table


def _doctor_verdict_in(folder: Path) -> Path:
    """A doctor run's folder with one suspect, as the workers leave it; the folder, as local_workers.start
    returns the one it claimed."""
    doctor_run(folder, 3, suspects=[("node", ["c"])])
    return folder


def test_the_doctor_records_its_run_once_its_workers_are_done(monkeypatch, tmp_path):
    """Without a launcher the process that started the workers records the run, suspects and all (exit 1)."""
    from nccl_bench.cli import local_workers, main

    store, out = tmp_path / "h.sqlite", tmp_path / "run"
    monkeypatch.setattr(local_workers, "start", lambda *args: _doctor_verdict_in(out))
    monkeypatch.setattr(sys, "argv", ["nccl-bench", "doctor", "--backend", "gloo", "--workers", "2", "--out", str(out),
                                      "--history", str(store)])
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 1
    nodes = json.loads(history_cli(tmp_path, str(store), "nodes", "--json").stdout)["hosts"]
    assert [(h["host"], h["flagged"]) for h in nodes] == [("a", 0), ("b", 0), ("c", 1)]


def test_rank_0_under_a_launcher_records_the_doctor_run(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from nccl_bench.cli import main, on_ranks
    from nccl_bench.doctor import doctor_body

    store, out = tmp_path / "h.sqlite", tmp_path / "run"

    def execute(config, observer_factory, on_stuck=None):
        _doctor_verdict_in(out)
        return SimpleNamespace(judgement=SimpleNamespace(suspects=[], verdict="healthy"), run_dir=out,
                               status="complete")

    monkeypatch.setattr(on_ranks, "detect_launch", lambda: SimpleNamespace(rank=0, launcher="torchrun", world_size=2))
    monkeypatch.setattr(doctor_body, "execute", execute)
    monkeypatch.setattr(sys, "argv", ["nccl-bench", "doctor", "--backend", "gloo", "--out", str(out),
                                      "--history", str(store)])
    main()
    assert json.loads(history_cli(tmp_path, str(store), "nodes", "--json").stdout)["hosts"][2]["flagged"] == 1


def _store_written_before_escaping(folder: Path) -> tuple[Path, str]:
    """A store of schema 2 holding a run as the tool before escaping stored it: inserted with sqlite3, the
    host name holding a raw ESC in its system, series and results; the raw system."""
    import contextlib
    import sqlite3

    from tests.helpers.history_stores import sqlite_store_with_run

    path = sqlite_store_with_run(folder / "old.sqlite", sweep_run(folder / "r1", 1))
    raw_system = "cpu@vm\x1b[31mred"
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE store_info SET value = '2' WHERE name = 'schema_version'")
        [run] = db.execute("SELECT * FROM runs").fetchall()
        columns = [column[1] for column in db.execute("PRAGMA table_info(runs)")]
        raw_run = dict(zip(columns, run, strict=True), run_id="e" * 32, started_utc="2026-01-02T00:00:00+00:00",
                       system=raw_system)
        db.execute(f"INSERT INTO runs ({', '.join(raw_run)}) VALUES ({', '.join('?' * len(raw_run))})",
                   tuple(raw_run.values()))
        for table in ("results", "series"):
            columns = [column[1] for column in db.execute(f"PRAGMA table_info({table})")]
            for row in db.execute(f"SELECT * FROM {table}").fetchall():
                copy = dict(zip(columns, row, strict=True))
                copy.update(series=copy["series"].replace("cpu@vm", raw_system), system=raw_system)
                if table == "results":
                    copy.update(run_id=raw_run["run_id"], started_utc=raw_run["started_utc"])
                db.execute(f"INSERT INTO {table} ({', '.join(copy)}) VALUES ({', '.join('?' * len(copy))})",
                           tuple(copy.values()))
    return path, raw_system


def test_a_store_written_before_escaping_shows_every_runs_series(tmp_path):
    path, raw_system = _store_written_before_escaping(tmp_path)
    shown = history_cli(tmp_path, str(path), "show", "--json")
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    assert found["runs"] == 2 and sum(series["runs"] for series in found["series"]) == 2 * 2
    assert {series["system"] for series in found["series"]} == {"cpu@vm", "cpu@vm\\x1b[31mred"}
    checked = history_cli(tmp_path, str(path), "check", "--run", "e" * 12)
    assert "no series to judge" not in checked.stderr and checked.returncode == 0, checked.stderr
    added = history_cli(tmp_path, str(path), "add", str(sweep_run(tmp_path / "r3", 3, hosts=("vm\x1b[31mred",) * 2)))
    assert added.returncode == 0, added.stderr
    again = json.loads(history_cli(tmp_path, str(path), "show", "--json").stdout)
    assert sorted(series["runs"] for series in again["series"]) == [1, 1, 2, 2]
    assert raw_system not in path.read_bytes().decode("utf-8", "replace")
