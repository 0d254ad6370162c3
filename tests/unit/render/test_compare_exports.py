"""Markdown, JUnit and JSON renderings of a comparison."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from nccl_bench import comparison as cmp
from nccl_bench.render import compare_exports as ex
from nccl_bench.results.schema import STATUS_UNSUPPORTED
from tests.helpers.rows import MiB, row


@pytest.fixture
def comparison() -> cmp.Comparison:
    base = [row(size_bytes=MiB), row(size_bytes=2 * MiB), row(size_bytes=4 * MiB), row(size_bytes=8 * MiB)]
    cur = [
        row(size_bytes=MiB, time_us=150.0),  # regression
        row(size_bytes=2 * MiB),  # ok
        row(size_bytes=4 * MiB, status=STATUS_UNSUPPORTED, time_us=None),  # skipped
        row(size_bytes=16 * MiB),  # only in current
    ]
    return cmp.compare_rows(base, cur, baseline_label="BASELINE a|b", current_label="CURRENT c")


def markdown_table(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip().strip("|").replace("\\|", "\0").split("|")] for line in lines]


def test_markdown_is_a_valid_table_with_one_line_per_row(comparison):
    text = ex.to_markdown(comparison)
    table = markdown_table(text)
    header, separator, body = table[0], table[1], table[2:]
    assert header == list(ex._HEADERS)
    assert all(set(cell) <= set("-:") and "-" in cell for cell in separator)
    assert all(len(line) == len(header) for line in table)
    assert len(body) == len(comparison.rows) == 5
    assert body[0][0] == "all_reduce" and body[0][1] == "1,048,576" and body[0][9] == "**regression**"
    assert header[1] == "size (B)" and body[0][4] == "in" and body[0][5] == "busbw (GB/s)"
    assert body[0][8] == "-33.3%"
    assert text.startswith("### nccl-bench compare: regression\n")
    assert comparison.summary() in text


def test_junit_counts_testcases_failures_and_skips(comparison):
    root = ET.fromstring(ex.to_junit_xml(comparison))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 5
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "1", "3")
    failing = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["all_reduce 1M float sum in_place n=2"]
    message = failing[0].find("failure").get("message")
    assert "busbw" in message and "-33.3%" in message
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["tolerance"] == "10%"


def test_junit_of_a_clean_comparison_has_no_failures():
    clean = cmp.compare_rows([row()], [row()])
    suite = ET.fromstring(ex.to_junit_xml(clean)).find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("1", "0")


def test_json_round_trips_with_verdicts_and_exit_code(comparison):
    data = json.loads(json.dumps(ex.to_json(comparison)))
    assert data["exit_code"] == 1
    assert data["tolerance"] == 0.1
    assert [r["verdict"] for r in data["rows"]] == [
        "regression", "ok", "unsupported", "missing in current", "missing in baseline",
    ]
    assert data["rows"][0]["metric"] == "busbw_gbps"
    assert data["rows"][0]["delta_pct"] == pytest.approx(-100 / 3)
    assert data["rows"][4]["baseline_row"] is None


def test_write_exports_and_step_summary_append(comparison, tmp_path):
    paths = ex.write_exports(comparison, tmp_path / "r.md", tmp_path / "r.xml", tmp_path / "r.json")
    assert [p.name for p in paths] == ["r.md", "r.xml", "r.json"]
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    ex.append_step_summary(comparison, summary)
    text = summary.read_text()
    assert text.startswith("earlier step\n### nccl-bench compare")
    assert ex.step_summary_path({"GITHUB_STEP_SUMMARY": str(summary)}) == summary
    assert ex.step_summary_path({}) is None


def test_junit_of_many_rows_has_one_testcase_each_in_row_order():
    rows = [row(size_bytes=8 * (i + 1)) for i in range(5000)]
    suite = ET.fromstring(ex.to_junit_xml(cmp.compare_rows(rows, rows))).find("testsuite")
    cases = suite.findall("testcase")
    assert (suite.get("tests"), suite.get("failures"), len(cases)) == ("5000", "0", 5000)
    assert cases[-1].get("name") == "all_reduce 40000 float sum in_place n=2"


def test_variants_are_points_of_their_own_and_each_row_names_its_variant():
    ring, tree = "NCCL_ALGO=Ring", "NCCL_ALGO=Tree"
    base = [row(size_bytes=MiB, variant=ring), row(size_bytes=MiB, variant=tree)]
    cur = [row(size_bytes=MiB, variant=ring), row(size_bytes=MiB, variant=tree, time_us=150.0)]
    result = cmp.compare_rows(base, cur, baseline_label="BASELINE a", current_label="CURRENT b")
    assert [(r.key.variant, r.verdict) for r in result.rows] == [(ring, cmp.VERDICT_OK),
                                                                 (tree, cmp.VERDICT_REGRESSION)]
    assert [ex.comparison_cells(r)[0] for r in result.rows] == [f"all_reduce [{ring}]", f"all_reduce [{tree}]"]
    assert [r["variant"] for r in ex.to_json(result)["rows"]] == [ring, tree]
    assert ex.failure_lines(result)[0].startswith(f"regression: all_reduce 1M float sum in_place n=2 [{tree}]: busbw")
