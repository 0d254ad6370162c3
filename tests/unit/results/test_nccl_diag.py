"""NCCL's diagnostics report (NCCL 2.31) read into findings, and what the doctor's configuration phase makes
of them.

The report lines are quoted from NVIDIA's documentation:
- ACTIVE_*: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/diagnostics.html
  ("Running Active Diagnostics": a report with no issue, and a partial P2P result);
- RAS_*: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/ras.html ("RAS
  Diagnostics", "Output Format": an on-demand report with no issue, and one check grouping ranks by value).
"""

from __future__ import annotations

import pytest

from nccl_bench.doctor.config_check import Fact, HostFacts, judge_config, nccl_diag_suspects
from nccl_bench.results.nccl_diag import (
    MAX_FINDINGS,
    MAX_MESSAGE_CHARS,
    DiagFinding,
    parse_line,
    parse_report,
    report_lines,
)

ACTIVE_OK = """\
NCCL DIAG === NCCL Diagnostics ===
NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair (56 peer accesses)
NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks"""
ACTIVE_PARTIAL = "NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification"
RAS_OK = """\
node042:12345 NCCL DIAG === RAS Diagnostics ===
node042:12345 NCCL DIAG [OK]   GPU inventory: 8x NVIDIA H100 per node consistent across 8 ranks in comm 0x1234
node042:12345 NCCL DIAG [OK]   CUDA driver version: 13000 consistent across 8 ranks in comm 0x1234
node042:12345 NCCL DIAG [OK]   ECC: no uncorrected volatile errors across 8 ranks in comm 0x1234
node042:12345 NCCL DIAG [OK]   NVLink: found 18 link(s) per device, all active across 8 ranks in comm 0x1234
node042:12345 NCCL DIAG [OK]   NCCL environment: NCCL_* env vars consistent across 8 ranks in comm 0x1234
node042:12345 NCCL DIAG RAS diagnostics completed in 12.3 ms across 8 RAS peers"""
RAS_MISMATCH = """\
node042:12345 NCCL DIAG [INFO] NCCL environment: mismatch across 8 ranks in comm 0x1234 for NCCL_DEBUG
node042:12345 NCCL DIAG [INFO] NCCL environment: NCCL_DEBUG=INFO on rank(s) {0,1,2,3}
node042:12345 NCCL DIAG [INFO] NCCL environment: NCCL_DEBUG=WARN on rank(s) {4,5,6,7}
node042:12345 NCCL DIAG [INFO] NCCL environment: 1 NCCL_* env var(s) differ across ranks in comm 0x1234"""
# Two hosts of four ranks each, as the world's ranks map to them.
RANK_HOSTS = ["node001"] * 4 + ["node002"] * 4


def test_a_clean_active_report_is_one_ok_finding():
    assert parse_report(ACTIVE_OK) == [DiagFinding(
        "OK", "p2p", "verified P2P access in both directions between every GPU pair (56 peer accesses)")]


def test_a_partial_p2p_result_needs_review():
    finding = parse_line(ACTIVE_PARTIAL)
    assert finding == DiagFinding("INFO", "p2p", "only 52/56 GPU-to-GPU peer accesses passed verification")
    assert finding.needs_review


def test_a_ras_report_names_its_host_checks_and_communicator():
    findings = parse_report(RAS_OK)
    assert [(f.status, f.check, f.comm, f.host) for f in findings] == [
        ("OK", "GPU inventory", "0x1234", "node042"), ("OK", "CUDA driver version", "0x1234", "node042"),
        ("OK", "ECC", "0x1234", "node042"), ("OK", "NVLink", "0x1234", "node042"),
        ("OK", "NCCL environment", "0x1234", "node042")]
    assert not any(f.needs_review for f in findings)


def test_ranks_grouped_by_value_are_read():
    findings = parse_report(RAS_MISMATCH)
    assert [f.ranks for f in findings] == [(), (0, 1, 2, 3), (4, 5, 6, 7), ()]
    assert findings[1].message == "NCCL_DEBUG=INFO on rank(s) {0,1,2,3}"


def test_a_cut_rank_list_says_so_and_keeps_the_ranks_it_names():
    finding = parse_line("h:1 NCCL DIAG [INFO] NCCL environment: NCCL_DEBUG=WARN on rank(s) {4,5,6,...} (40 ranks)")
    assert finding.ranks == (4, 5, 6) and finding.ranks_cut


def test_report_lines_are_picked_out_of_what_a_process_group_printed():
    printed = f"NCCL INFO Bootstrap: using eth0\n{ACTIVE_OK}\nsome other line mentioning NCCL DIAG\n{ACTIVE_PARTIAL}\n"
    assert report_lines(printed) == [*ACTIVE_OK.splitlines(), ACTIVE_PARTIAL]


@pytest.mark.parametrize("line", [
    "",
    "NCCL DIAG",
    "NCCL DIAG [",
    "NCCL DIAG [ok] p2p: lower-case tags are not NCCL's",
    "NCCL DIAG === NCCL Diagnostics ===",
    "NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks",
    "[0] host:1:1 [0] NCCL INFO NCCL DIAG [INFO] p2p: inside another log line",
    "prefix NCCL DIAG [INFO] p2p: not at the start",
])
def test_lines_that_are_no_result_are_skipped(line):
    assert parse_line(line) is None


def test_an_undocumented_tag_is_kept_as_a_finding_to_review():
    finding = parse_line("NCCL DIAG [WARN] p2p: GPU 0 -> GPU 1 failed")
    assert finding.status == "WARN" and finding.needs_review


def test_hostile_text_is_bounded_and_escaped_where_it_is_shown():
    hostile = "NCCL DIAG [INFO] p2p: \x1b[2J\x1b]0;owned\x07<script>| x" + "A" * 5000
    finding = parse_line(hostile)
    assert len(finding.message) == MAX_MESSAGE_CHARS + len("...")
    line = nccl_diag_suspects([_host("node001", finding)], RANK_HOSTS)[0].line()
    assert "\x1b" not in line and "\x07" not in line and "\\x1b[2J" in line
    assert "\n" not in line


def test_odd_rank_lists_name_only_ranks_that_exist():
    finding = parse_line("NCCL DIAG [INFO] NCCL environment: X=1 on rank(s) {2,²,-1,99,9999999999,, 5 }")
    assert finding.ranks == (2, 99, 5)
    suspects = nccl_diag_suspects([_host("node001", finding)], RANK_HOSTS)
    assert [s.hosts for s in suspects] == [("node001", "node002")]  # rank 99 is none of this world's


def test_a_flood_of_lines_stops_at_the_cap():
    assert len(parse_report([ACTIVE_PARTIAL] * (MAX_FINDINGS + 10))) == MAX_FINDINGS


def _host(name: str, *findings: DiagFinding) -> HostFacts:
    return HostFacts(name, {"driver": Fact("580.159.04", "test")}, (), (), findings)


def test_each_finding_to_review_is_one_config_line_naming_the_hosts_of_its_ranks():
    hosts = [_host("node001", *parse_report(RAS_OK + "\n" + RAS_MISMATCH)), _host("node002")]
    assert [s.line() for s in judge_config(hosts, rank_hosts=RANK_HOSTS)] == [
        "config node[001-002]: NCCL DIAG [INFO] NCCL environment: mismatch across 8 ranks in comm 0x1234 for "
        "NCCL_DEBUG",
        "config node001: NCCL DIAG [INFO] NCCL environment: NCCL_DEBUG=INFO on rank(s) {0,1,2,3}",
        "config node002: NCCL DIAG [INFO] NCCL environment: NCCL_DEBUG=WARN on rank(s) {4,5,6,7}",
        "config node[001-002]: NCCL DIAG [INFO] NCCL environment: 1 NCCL_* env var(s) differ across ranks in comm "
        "0x1234",
    ]
    assert not any(s.degraded for s in judge_config(hosts, rank_hosts=RANK_HOSTS))  # NCCL: informational


def test_a_line_naming_no_rank_names_the_whole_communicator_and_ok_lines_name_nobody():
    hosts = [_host("node001", *parse_report(ACTIVE_OK + "\n" + ACTIVE_PARTIAL)), _host("node002")]
    assert [s.line() for s in judge_config(hosts, rank_hosts=RANK_HOSTS)] == [
        "config node[001-002]: NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification"]
    assert judge_config([_host("node001", *parse_report(ACTIVE_OK)), _host("node002")], rank_hosts=RANK_HOSTS) == []
