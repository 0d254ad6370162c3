"""nccl-tests -J JSON import (a constructed version-3 document, see tests/fixtures/nccl_tests/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.results import nccltests_json
from nccl_bench.results.loader import load_rows
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT
from tests.helpers.rows import row_at

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def test_json_fixture():
    rows = load_rows(FIXTURES / "constructed_v3_all_reduce_perf.json")
    assert len(rows) == 4
    first = row_at(rows, 8192, PLACEMENT_OUT)
    assert (first.op, first.world_size, first.nodes, first.iters) == ("all_reduce", 2, 2, 100)
    assert (first.time_us, first.algbw_gbps, first.busbw_gbps, first.wrong) == (35.15, 0.233058, 0.233058, 0)
    unchecked = row_at(rows, 16384, PLACEMENT_IN)
    assert unchecked.wrong is None and unchecked.time_us == 30.75 and unchecked.root == -1


def test_json_without_results_is_a_user_error():
    with pytest.raises(UserInputError, match="no 'results' list"):
        nccltests_json.parse_json({"version": 3}, source="x.json")


def test_per_iteration_percentiles_of_minus_i_are_read_where_present():
    import json

    document = json.loads((FIXTURES / "constructed_v3_all_reduce_perf.json").read_text())
    document["results"][0]["out_of_place_per_iter"] = {"p50_us": 30.0, "p95_us": 41.5, "p99_us": 52.25}
    rows = nccltests_json.parse_json(document, source="x.json")
    timed = row_at(rows, 8192, PLACEMENT_OUT)
    assert (timed.p50_us, timed.p95_us, timed.p99_us) == (30.0, 41.5, 52.25)
    assert row_at(rows, 8192, PLACEMENT_IN).p95_us is None  # no per-iteration block: not measured


LATE_FIXTURE = FIXTURES / "constructed_v3_all_reduce_perf_minus_i_late.json"


def test_a_late_process_of_minus_i_is_named_with_its_host_at_every_size_it_was_planted():
    rows = load_rows(LATE_FIXTURE)
    named = {(r.size_bytes, r.placement): (r.late_rank, r.late_host) for r in rows if r.late_rank is not None}
    late = (2, "node002")
    assert named == {(size, placement): late for size in (1024, 2048) for placement in (PLACEMENT_OUT, PLACEMENT_IN)}
    row = row_at(rows, 1024, PLACEMENT_OUT)
    assert 270 < row.late_us < 330  # planted: 300 us +- 15 of the others' wait, less the noise of its own time
    assert row_at(rows, 4096, PLACEMENT_IN).late_us is None  # no process planted there: none named


def test_minus_i_spike_statistics_are_nccl_tests_own():
    import json

    document = json.loads(LATE_FIXTURE.read_text())
    per_iter = document["results"][0]["out_of_place_per_iter"]
    row = row_at(nccltests_json.parse_json(document, source="x.json"), 1024, PLACEMENT_OUT)
    assert (row.i_p99_us, row.i_cv_pct) == (per_iter["p99_us"], per_iter["cv_pct"])


def test_per_process_times_that_cannot_be_matched_to_ranks_name_nobody():
    import json

    document = json.loads(LATE_FIXTURE.read_text())
    del document["config"]["devices"][3]  # four lists of times, three processes listed: which rank is which?
    rows = nccltests_json.parse_json(document, source="x.json")
    assert all(r.late_rank is None for r in rows)


def test_the_iterations_nccl_tests_skipped_are_skipped_here_too():
    import json

    document = json.loads(LATE_FIXTURE.read_text())
    per_iter = document["results"][2]["out_of_place_per_iter"]  # 4K: nobody planted
    for index, times in enumerate(per_iter["per_process_max_times_us"]):
        # process 0 late from iteration 3 on (17 of 20: under LAST_SHARE), the first 3 a warm-up it led
        times[:] = [400.0 if index == 0 else 30.0] * 3 + [30.0 if index == 0 else 330.0] * 17

    def late_rank(skipped: int) -> int | None:
        per_iter["skipped_iterations"] = skipped
        return row_at(nccltests_json.parse_json(document, source="x.json"), 4096, PLACEMENT_OUT).late_rank

    assert (late_rank(0), late_rank(3)) == (None, 0)
