"""The doctor's report: node-pair matrix, node table, suspect lines, header."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console

from nccl_bench.render.doctor_text import (
    estimate_line,
    header_lines,
    node_table,
    pair_matrix,
    suspect_lines,
)
from tests.helpers.doctor_reports import three_node_header, three_node_judgement


def test_pair_matrix_takes_the_slowest_rail_symmetric():
    hosts, matrix = pair_matrix(three_node_judgement())
    assert hosts == ["a", "b", "c"]
    assert matrix[0][1] == matrix[1][0] == 1.8
    assert matrix[1][2] == matrix[2][1] == 0.2
    assert all(math.isnan(matrix[i][i]) for i in range(3))


def test_suspect_lines_and_node_table():
    judgement = three_node_judgement()
    assert suspect_lines(judgement) == [
        # the fleet median is the median of 6 endpoint capacities
        "node c: pair busbw 0.20 GB/s with 2 of 2 partners, fleet median 1.80 GB/s (-89%)"]
    console = Console(width=200, record=True, color_system=None)
    console.print(node_table(judgement))
    text = console.export_text()
    assert "10.50" in text and "suspect" in text and text.count(" ok ") == 2


def test_header_and_estimate_lines():
    lines = header_lines(three_node_header(Path("/r")))
    assert lines[0] == "# nccl_bench doctor: backend gloo via torchrun, 6 ranks on 3 node(s), 2 rank(s) each (a, b, c)"
    assert "# results: /r" in lines and lines[-1] == "# note: a note"
    assert estimate_line(63, 0.1) == (
        "# estimate: 63 round(s) x ~0.10 s = ~6.3 s for the pairs, plus re-tests of anything low"
    )


def test_exclude_line_is_a_compressed_slurm_hostlist():
    from nccl_bench.doctor.roster import missing_suspects
    from nccl_bench.doctor.verdicts import Suspect
    from nccl_bench.render.doctor_text import exclude_lines

    judgement = three_node_judgement()
    judgement.suspects[:] = [Suspect("node", ("node07",), None, 0.1, 1.0, "slow"),
                             Suspect("rail", ("node03",), 0, 0.1, 1.0, "slow rail"),
                             *missing_suspects(["node03", "node07", "node08"], ["node03", "node07"], "--expect-hosts")]
    assert exclude_lines(judgement, Path("/x/bad.txt")) == [
        "# exclude: node[03,07-08] (sbatch --exclude=node[03,07-08]); written to /x/bad.txt"]
    judgement.suspects.clear()
    assert exclude_lines(judgement, Path("/x/bad.txt")) == ["# exclude: none; written to /x/bad.txt"]
    assert exclude_lines(judgement, None) == []
