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
