"""The late rank named on real gloo ranks: a planted late arrival (NCCL_BENCH_FAULT=late:RANK:US, ranks/planted.py)
is named at every size and no other rank is; an unplanted run names none; ranks.csv holds every rank's time
in the op and arrival offset per point and trial, in its documented columns, one line per trial and rank.

The planted delay is 20 ms per op: far above what this shared 2-core host's scheduler moves a rank's median
arrival (hundreds of microseconds, benchmarks/RESULTS.md), so the test cannot fail by the host's load.
"""

from __future__ import annotations

import csv

import pytest

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.schema import RANK_COLUMNS, RANKS_CSV
from tests.helpers.launch import ok, run_cli

pytestmark = pytest.mark.integration

SWEEP = ["sweep", "--no-plot", "--workers", "3", "--op", "all_reduce", "--sizes", "1K,64K", "--iters", "20", "-w", "2",
         "--trials", "2", "--no-history"]


def test_a_planted_late_rank_is_named_and_no_other(tmp_path):
    out = tmp_path / "run"
    stdout = ok(run_cli([*SWEEP, "--out", str(out)], env={"NCCL_BENCH_FAULT": "late:2:20000"}))
    rows = read_rows(out)
    assert [(r.size_bytes, r.late_rank) for r in rows] == [(1024, 2), (65536, 2)]
    assert all("late" in r.flags.split(";") and r.late_host and r.late_us > 10_000 for r in rows)
    assert all(r.max_time_rank != 2 for r in rows)  # the most time in the op is a victim's, never the culprit's
    assert "# rank 2 (" in stdout and "late at 1K-64K (all_reduce in, 2 of 2 sizes)" in stdout
    with (out / RANKS_CSV).open(newline="") as handle:
        lines = list(csv.DictReader(handle))
    assert tuple(lines[0]) == RANK_COLUMNS
    assert len(lines) == 2 * 2 * 3  # sizes x trials x ranks: bounded by the plan, not by iterations
    assert {(line["size_bytes"], line["trial"], line["rank"]) for line in lines} == {
        (size, trial, rank) for size in ("1024", "65536") for trial in "01" for rank in "012"}
    for size in ("1024", "65536"):
        point = [line for line in lines if line["size_bytes"] == size]
        late = [float(line["arrival_us"]) for line in point if line["rank"] == "2"]
        waited = [float(line["time_in_op_us"]) for line in point if line["rank"] != "2"]
        assert min(late) > 10_000  # 20 ms behind the earliest rank at the median op
        # the culprit spends the least time inside the op: the others wait for it there
        assert max(float(line["time_in_op_us"]) for line in point if line["rank"] == "2") < min(waited)


def test_an_unplanted_run_names_no_rank(tmp_path):
    out = tmp_path / "run"
    stdout = ok(run_cli([*SWEEP, "--out", str(out)]))
    rows = read_rows(out)
    assert [r.late_rank for r in rows] == [None, None] and not any("late" in r.flags.split(";") for r in rows)
    assert " arrived " not in stdout
    assert all(r.i_p99_us >= r.p50_us and r.i_cv_pct is not None for r in rows)
