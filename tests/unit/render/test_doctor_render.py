"""The doctor's report: node-pair matrix, node table, suspect lines, header, heatmap PNG."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console

from nccl_bench.doctor.run import DoctorHeader, DoctorReport, Node
from nccl_bench.doctor.verdicts import judge
from nccl_bench.render.doctor import (
    DoctorReporter,
    estimate_line,
    header_lines,
    node_table,
    pair_matrix,
    suspect_lines,
    write_heatmap,
)


def _judgement():
    layout = [("a", [0, 1]), ("b", [2, 3]), ("c", [4, 5])]
    pairs = {("a", "b", 0): [2.0, 2.0], ("a", "b", 1): [1.8, 1.8], ("a", "c", 0): [0.2, 0.2],
             ("a", "c", 1): [0.2, 0.2], ("b", "c", 0): [0.2, 0.2], ("b", "c", 1): [0.25, 0.25]}
    return judge(layout, {"a": [10.0, 10.0], "b": [10.5, 10.5], "c": [9.5, 9.5]}, pairs, tolerance=0.2)


def _header(run_dir=None):
    return DoctorHeader(
        backend="gloo", launcher="torchrun", world_size=6, nodes=(Node("a", (0, 1)), Node("b", (2, 3)), Node("c", (4, 5))),
        versions={"torch": "2.x"}, size_bytes=4 * 1024**2, iters=4, samples=3, warmup=1, phases=("nodes", "pairs"),
        mode="full", rounds=3, tolerance=0.2, expect_gbps=None, run_dir=run_dir, notes=("a note",),
    )


def test_pair_matrix_takes_the_slowest_rail_symmetric():
    hosts, matrix = pair_matrix(_judgement())
    assert hosts == ["a", "b", "c"]
    assert matrix[0][1] == matrix[1][0] == 1.8
    assert matrix[1][2] == matrix[2][1] == 0.2
    assert all(math.isnan(matrix[i][i]) for i in range(3))


def test_suspect_lines_and_node_table():
    judgement = _judgement()
    assert suspect_lines(judgement) == [
        "node c: pair busbw 0.20 GB/s with 2 of 2 partners, fleet median 1.80 GB/s (-89%)"]  # median of 6 endpoint capacities
    console = Console(width=200, record=True, color_system=None)
    console.print(node_table(judgement))
    text = console.export_text()
    assert "10.50" in text and "suspect" in text and text.count(" ok ") == 2


def test_header_and_estimate_lines():
    lines = header_lines(_header(Path("/r")))
    assert lines[0] == "# nccl_bench doctor: backend gloo via torchrun, 6 ranks on 3 node(s), 2 rank(s) each (a, b, c)"
    assert "# results: /r" in lines and lines[-1] == "# note: a note"
    assert estimate_line(63, 0.1) == "# estimate: 63 round(s) x ~0.10 s = ~6.3 s for the pairs, plus re-tests of anything low"


def test_reporter_prints_the_report_and_draws_the_heatmap(tmp_path):
    console = Console(width=200, record=True, color_system=None)
    reporter = DoctorReporter(console)
    reporter.started(_header(tmp_path))
    reporter.pairs_planned(3, 0.5)
    reporter.rounds_added(2, ["a-c", "b-c"])
    report = DoctorReport(run_dir=tmp_path, header=_header(tmp_path), judgement=_judgement(), status="complete",
                          wall_s=1.5)
    reporter.finished(report)
    text = console.export_text()
    assert "# re-test in 2 more round(s), nobody is named on one measurement: a-c, b-c" in text
    assert "node c: pair busbw 0.20 GB/s" in text and "# verdict: suspects (1 suspect(s)), 1.5 s" in text
    assert report.heatmap_path == tmp_path / "pairs.png" and report.heatmap_path.read_bytes()[:4] == b"\x89PNG"
    assert write_heatmap(judge([("x", [0])], {}, {}, 0.2), tmp_path / "none") is None  # no pairs, no picture
