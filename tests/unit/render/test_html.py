"""report --html: one self-contained page; headings agree with the other formats; doctor matrix."""

from __future__ import annotations

import json
import re
from functools import partial

from nccl_bench.doctor.doctor_report import DoctorReport, report_json
from nccl_bench.doctor.verdicts import judge
from nccl_bench.render import html as page
from nccl_bench.render.formats import to_markdown
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT
from tests.helpers.doctor_reports import three_node_header, three_node_judgement
from tests.helpers.rows import row


def _doctor_json(judgement) -> dict:
    """doctor.json as the doctor writes it (doctor/doctor_report.report_json), through a JSON round trip."""
    report = DoctorReport(run_dir=None, header=three_node_header(), judgement=judgement, status="complete", wall_s=42.0)
    return json.loads(json.dumps(report_json(report)))


DOCTOR = _doctor_json(three_node_judgement())  # nodes a, b, c; every pair with c slow: c is the suspect


# Each row's time follows from its busbw; 20 GB/s is the peak its %peak is of.
_row = partial(row, size_bytes=1 << 20, dtype="float32", spread=0.0, p50_us=None, p99_us=None, peak=20.0)
ROWS = [_row(op="all_reduce", placement=PLACEMENT_IN, busbw=1.25),
        _row(op="all_gather", placement=PLACEMENT_OUT, busbw=0.5)]


def test_page_is_self_contained_and_ends_with_a_newline():
    text = page.html_report([page.RunPage("run", ROWS)])
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n")
    assert "<script" not in text and "<link" not in text and "@import" not in text
    assert re.findall(r"url\((?!#)", text) == []  # only the SVG's own clip paths
    # the only addresses are XML namespace names inside the inline SVG, which nothing fetches
    addresses = set(re.findall(r"https?://[^\s\"'<>]+", text))
    assert addresses <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    assert re.findall(r"\b(?:src|href)=\"(?!#)", text) == []
    assert "<svg" in text and "1,048,576" in text and "1.25" in text


def test_html_headings_are_the_markdown_headings():
    text = page.html_report([page.RunPage("run", ROWS)])
    table = text[text.index('<table class="results">'):]
    html_heads = re.findall(r"<th[^>]*>([^<]*)</th>", table[: table.index("</thead>")])
    markdown_heads = [h.strip() for h in to_markdown(ROWS).splitlines()[0].strip("|").split("|")]
    assert html_heads == markdown_heads
    assert "%peak" in html_heads and "flags" in html_heads and "p50 (us)" in html_heads


def test_two_runs_get_a_compare_verdict():
    slower = [_row(op="all_reduce", placement=PLACEMENT_IN, busbw=0.5),
              _row(op="all_gather", placement=PLACEMENT_OUT, busbw=0.5)]
    text = page.html_report([page.RunPage("base", ROWS), page.RunPage("new", slower)])
    assert "Compare: new against baseline base" in text
    assert 'class="verdict bad">REGRESSION: 2 rows compared (1 regression, 1 ok)' in text


def test_doctor_json_is_read_from_the_run_folder_and_drawn_as_a_matrix(tmp_path):
    (tmp_path / "doctor.json").write_text(json.dumps(DOCTOR))
    doctor = page.read_doctor(tmp_path)
    nodes, cells = page.doctor_matrix(doctor)
    assert nodes == ["a", "b", "c"]  # each host once, by name
    assert [e["rail"] for e in cells[("a", "b")]] == [0, 1] and cells[("a", "c")][0]["busbw_gbps"] == 0.2
    text = page.html_report([page.RunPage("run", ROWS, doctor=doctor)])
    matrix = text[text.index('<table class="doctor">'):]
    heads = re.findall(r"<th>([^<]*)</th>", matrix[: matrix.index("</thead>")])
    assert heads == ["", "a", "b", "c"]
    assert '<p class="verdict bad">doctor verdict: suspects</p>' in text
    assert "<li>node c: pair busbw 0.20 GB/s with 2 of 2 partners, fleet median 1.80 GB/s (-89%)</li>" in text
    assert '<span class="good" title="ok">rail 0: 2.0</span>' in text
    assert '<span class="bad" title="suspect">rail 1: 0.2</span>' in text
    (tmp_path / "doctor.json").write_text(json.dumps({**DOCTOR, "schema_version": 2}))
    assert page.read_doctor(tmp_path)["schema_version"] == 2  # 2 and 3 only added keys
    (tmp_path / "doctor.json").write_text(json.dumps({**DOCTOR, "schema_version": 3}))
    assert page.read_doctor(tmp_path)["schema_version"] == 3
    (tmp_path / "doctor.json").write_text(json.dumps({**DOCTOR, "schema_version": 4}))
    assert page.read_doctor(tmp_path) is None  # another schema is not guessed at


def test_a_healthy_doctor_run_is_styled_good():
    layout = [("a", [0, 1]), ("b", [2, 3]), ("c", [4, 5])]
    pairs = {(a, b, 0): [2.0, 2.0] for a, b in (("a", "b"), ("a", "c"), ("b", "c"))}
    healthy = _doctor_json(judge(layout, {"a": [10.0], "b": [10.0], "c": [10.0]}, pairs, tolerance=0.2))
    text = page.html_report([page.RunPage("run", [], doctor=healthy)])
    assert '<p class="verdict good">doctor verdict: healthy</p>' in text
    assert "Suspects" not in text and 'class="bad"' not in text and 'class="warn"' not in text
