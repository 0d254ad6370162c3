"""`history check` as CI runs it: the judged run and its age, `--run` of one run (and of a run the history
lacks), what changed for a regression in every output, `accept` with its reason, `diff`, bad windows."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_bench.history.records import read_record
from tests.helpers.history_runs import one_rank_run, sweep_run
from tests.helpers.history_stores import history_cli

STEADY = ((1, 1.0), (2, 0.99), (3, 1.01), (4, 1.0), (5, 0.995))
NEW_NCCL = {"versions": {"torch": "2.5.1", "nccl": "2.23.4"}, "env": {"NCCL_ALGO": "Tree"}}


def _steady_then(tmp_path: Path, store: str, *later: tuple[int, float, dict]) -> list[str]:
    """Five steady runs, then `later` (day, scale, meta); each run's id, in order."""
    runs = [sweep_run(tmp_path / f"r{day}", day, scale) for day, scale in STEADY]
    runs += [sweep_run(tmp_path / f"r{day}", day, scale, **meta) for day, scale, meta in later]
    added = history_cli(tmp_path, store, "add", *map(str, runs))
    assert added.returncode == 0, added.stderr
    return [read_record(run, "RUN", "").run_id for run in runs]


def test_a_slower_run_with_a_new_nccl_and_a_variable_is_flagged_naming_both(store_url, tmp_path):
    ids = _steady_then(tmp_path, store_url, (6, 0.85, NEW_NCCL))
    checked = history_cli(tmp_path, store_url, "check", "--json", "--markdown", "check.md", "--junit", "check.xml")
    assert checked.returncode == 1, checked.stderr
    lines = [line for line in checked.stderr.splitlines() if line.startswith("nccl-bench: error: regression:")]
    assert len(lines) == 2  # 64K and 1M
    for line in lines:
        assert f"run {ids[-1][:12]}" in line and "-15.0%" in line
        assert "changed: nccl version 2.21.5 -> 2.23.4; NCCL_ALGO unset -> Tree" in line
    assert f"judged run {ids[-1][:12]} (started 2026-01-06T00:00:00+00:00, " in checked.stderr
    document = json.loads(checked.stdout)
    assert document["regressions"] == 2 and document["judged_runs"][0]["run_id"] == ids[-1]
    assert document["judged_runs"][0]["age_s"] > 0
    assert all(s["changed"] == [{"what": "nccl version", "before": "2.21.5", "after": "2.23.4"},
                                {"what": "NCCL_ALGO", "before": "unset", "after": "Tree"}]
               for s in document["series"])
    markdown = (tmp_path / "check.md").read_text()
    assert "nccl version 2.21.5 -&gt; 2.23.4; NCCL_ALGO unset -&gt; Tree" in markdown
    failures = ET.parse(tmp_path / "check.xml").getroot().findall(".//failure")
    assert len(failures) == 2 and all("NCCL_ALGO unset -> Tree" in f.get("message") for f in failures)


def test_the_same_drop_with_nothing_changed_says_so(store_url, tmp_path):
    _steady_then(tmp_path, store_url, (6, 0.85, {}))
    checked = history_cli(tmp_path, store_url, "check")
    assert checked.returncode == 1
    assert "nothing recorded changed" in checked.stderr


def test_check_run_judges_exactly_that_run_and_fails_for_a_run_not_recorded(store_url, tmp_path):
    ids = _steady_then(tmp_path, store_url, (6, 0.85, {}), (7, 1.0, {}))
    # the latest run is back to normal; the run before it was slow, and --run judges that one
    assert history_cli(tmp_path, store_url, "check").returncode == 0
    judged = history_cli(tmp_path, store_url, "check", "--run", ids[5][:12])
    assert judged.returncode == 1 and f"judged run {ids[5][:12]}" in judged.stdout
    assert history_cli(tmp_path, store_url, "check", "--run", ids[4]).returncode == 0
    missing = history_cli(tmp_path, store_url, "check", "--run", "0123456789ab")
    assert missing.returncode == 3
    assert len(missing.stderr.strip().splitlines()) == 1
    assert missing.stderr.startswith("nccl-bench: error: --run: no run 0123456789ab in the history ")
    bad = history_cli(tmp_path, store_url, "check", "--run", "not-an-id")
    assert bad.returncode == 2 and "--run: 'not-an-id' is not a run id" in bad.stderr


def test_accept_turns_a_failing_series_green_with_its_reason(store_url, tmp_path):
    ids = _steady_then(tmp_path, store_url, (6, 0.8, NEW_NCCL), (7, 0.81, NEW_NCCL))
    assert history_cli(tmp_path, store_url, "check").returncode == 1  # the step lasts: still failing
    no_reason = history_cli(tmp_path, store_url, "accept", ids[5][:12])
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    accepted = history_cli(tmp_path, store_url, "accept", ids[5][:12], "--reason", "NCCL 2.23 <is> slower by design")
    assert accepted.returncode == 0, accepted.stderr
    assert f"accepted run {ids[5][:12]}" in accepted.stderr and "NCCL 2.23 <is> slower by design" in accepted.stderr
    checked = history_cli(tmp_path, store_url, "check", "--json")
    assert checked.returncode == 0, checked.stderr
    assert {s["verdict"] for s in json.loads(checked.stdout)["series"]} == {"ok"}
    at_accepted = history_cli(tmp_path, store_url, "check", "--run", ids[5][:12])
    assert at_accepted.returncode == 0
    assert "is the new normal: NCCL 2.23 <is> slower by design" in at_accepted.stdout


def test_diff_shows_each_series_change_and_what_changed(store_url, tmp_path):
    ids = _steady_then(tmp_path, store_url, (6, 0.5, NEW_NCCL))
    shown = history_cli(tmp_path, store_url, "diff", ids[4][:12], ids[5][:12])
    assert shown.returncode == 0, shown.stderr
    assert "-49.7%" in shown.stdout and "changed: nccl version 2.21.5 -> 2.23.4" in shown.stdout
    document = json.loads(history_cli(tmp_path, store_url, "diff", ids[4], ids[5], "--json").stdout)
    assert [round(s["change_pct"], 1) for s in document["series"]] == [-49.7, -49.7]
    assert {"what": "NCCL_ALGO", "before": "unset", "after": "Tree"} in document["changed"]


def test_diff_across_world_sizes_tells_the_rows_apart_by_their_ranks(tmp_path):
    store = str(tmp_path / "history.sqlite")
    runs = [sweep_run(tmp_path / "two", 1), one_rank_run(tmp_path / "one", 2)]
    assert history_cli(tmp_path, store, "add", *map(str, runs)).returncode == 0
    ids = [read_record(run, "RUN", "").run_id for run in runs]
    shown = history_cli(tmp_path, store, "diff", ids[0], ids[1])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    header = next(line for line in lines if line.split()[:1] == ["op"])
    assert header.split()[:5] == ["op", "placement", "size", "dtype", "ranks"]
    rows = [line.split() for line in lines if line.startswith("all_reduce")]
    assert sorted((row[2], row[4]) for row in rows) == [("1M", "1"), ("1M", "2"), ("64K", "1"), ("64K", "2")]
    assert len({tuple(row) for row in rows}) == 4  # no two rows alike
    document = json.loads(history_cli(tmp_path, store, "diff", ids[0], ids[1], "--json").stdout)
    assert sorted(s["world_size"] for s in document["series"]) == [1, 1, 2, 2]
    same = history_cli(tmp_path, store, "diff", ids[0], ids[0]).stdout
    assert "ranks" not in same  # one world size: nothing to tell apart


@pytest.mark.parametrize("window", ["2", "0"])
def test_a_window_that_can_never_judge_is_refused(store_url, tmp_path, window):
    _steady_then(tmp_path, store_url)
    refused = history_cli(tmp_path, store_url, "check", "--window", window)
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "--window" in refused.stderr


def test_too_few_runs_are_said_never_ok(store_url, tmp_path):
    runs = [sweep_run(tmp_path / f"r{day}", day) for day in (1, 2)]
    assert history_cli(tmp_path, store_url, "add", *map(str, runs)).returncode == 0
    checked = history_cli(tmp_path, store_url, "check", "--json")
    assert checked.returncode == 0
    assert {s["verdict"] for s in json.loads(checked.stdout)["series"]} == {"too_few"}
    assert "2 with too few runs" in checked.stderr


def test_accepting_an_accepted_run_with_another_reason_is_refused_and_the_first_reason_kept(store_url, tmp_path):
    ids = _steady_then(tmp_path, store_url, (6, 0.8, NEW_NCCL))
    assert history_cli(tmp_path, store_url, "accept", ids[5][:12], "--reason", "reason A").returncode == 0
    again = history_cli(tmp_path, store_url, "accept", ids[5][:12], "--reason", "reason A")
    assert again.returncode == 0 and "(2 already were): reason A" in again.stderr
    other = history_cli(tmp_path, store_url, "accept", ids[5][:12], "--reason", "reason B")
    assert other.returncode == 2 and other.stdout == ""
    [line] = other.stderr.splitlines()
    assert line.startswith(f"nccl-bench: error: --reason: run {ids[5][:12]} is the new normal already, accepted ")
    assert "with the reason 'reason A'; that reason is kept" in line and "reason B" not in line
    checked = history_cli(tmp_path, store_url, "check", "--json")
    assert {s["accepted_reason"] for s in json.loads(checked.stdout)["series"]} == {"reason A"}


def test_a_host_name_with_control_characters_is_stored_escaped_and_every_reader_shows_its_series(store_url,
                                                                                                 tmp_path):
    odd = [sweep_run(tmp_path / f"odd{day}", day, hosts=("no\x1b[31mde", "no\x1b[31mde")) for day in (1, 2, 3)]
    plain = [sweep_run(tmp_path / f"r{day}", day) for day in (1, 2, 3)]
    assert history_cli(tmp_path, store_url, "add", *map(str, odd + plain)).returncode == 0
    shown = json.loads(history_cli(tmp_path, store_url, "show", "--json").stdout)
    assert shown["runs"] == 6 and sum(series["runs"] for series in shown["series"]) == 6 * 2  # 2 sizes a run
    assert {series["system"] for series in shown["series"]} == {"cpu@vm", "cpu@no\\x1b[31mde"}
    table = history_cli(tmp_path, store_url, "show").stdout
    assert table.count("cpu@no\\x1b[31mde") == 2 and "\x1b" not in table
    checked = history_cli(tmp_path, store_url, "check", "--json")
    assert len(json.loads(checked.stdout)["series"]) == 4
    judged = history_cli(tmp_path, store_url, "check", "--run", read_record(odd[2], "RUN", "").run_id)
    assert judged.returncode == 0 and "in 2 series" in judged.stdout, judged.stderr
    assert history_cli(tmp_path, store_url, "html", "page.html").returncode == 0
    page = (tmp_path / "page.html").read_text()
    assert "cpu@no\\x1b[31mde" in page and "\x1b" not in page
