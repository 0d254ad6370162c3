"""NCCL's own diagnostics report (NCCL 2.31 and later), read from what NCCL printed (pure: text in).

With NCCL_RUN_DIAGNOSTICS=1 (active checks: P2P access between every GPU pair) or
NCCL_RUN_RAS_DIAGNOSTICS=1 (RAS checks: GPU inventory, CUDA driver version, volatile ECC, NVLink state,
NCCL_* variables across ranks), NCCL runs its checks at each communicator's initialization and prints
the report to the standard output of the process hosting the communicator's rank 0. What NVIDIA
documents of the lines, and all this module relies on:

- every report line carries the prefix ``NCCL DIAG``; a RAS report's lines start with the host name and
  process id of the process that asked, ``node042:12345 NCCL DIAG ...``;
- a header (``=== NCCL Diagnostics ===``, ``=== RAS Diagnostics ===``), result lines, and a completion line
  (``NCCL diagnostics completed in 245.3 ms across 8 ranks``);
- a result line is a tag, ``[OK]`` (the check reported no issue) or ``[INFO]`` (a condition that may need
  review: a failed verification, inconsistent values, a check that could not complete), then the check's
  name, a colon and its message (``[INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification``);
- a RAS check may group ranks by value over several lines, each naming its ranks as ``rank(s) {4,5,6,7}``
  and its communicator as ``in comm 0x1234``; a long rank list ends with an ellipsis.

Not documented, so not relied on: the lines that name a failed GPU pair and its path (the documentation
says the report names them, and shows none), any tag besides OK and INFO, and the DIAG subsystem's debug
lines (NCCL_DEBUG_SUBSYS=DIAG). A tagged line of another tag is kept as it reads, a finding to review; an
untagged line is not a result. Sources: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/
troubleshooting/diagnostics.html and .../troubleshooting/ras.html (section "RAS Diagnostics").

Nothing here escapes: what reaches a terminal or a file goes through the caller's escaping
(doctor/config_check.shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "NCCL DIAG"
OK = "OK"
# A report line is short (the documented ones are under 120 characters); a longer one is cut, so a
# hostile or broken stream cannot make one finding (and the line that reports it) unbounded.
MAX_MESSAGE_CHARS = 400
# Findings kept from one report: one per check and rank group; a stream that floods stops counting here.
MAX_FINDINGS = 64
# Report lines kept from what a process group printed while it started (headers and completion lines too).
MAX_REPORT_LINES = 4 * MAX_FINDINGS
CUT = "..."

_LINE = re.compile(r"^\s*(?:(?P<host>[^\s:]+):(?P<pid>\d+)\s+)?NCCL DIAG(?:\s+(?P<rest>.*))?$")
_TAGGED = re.compile(r"^\[(?P<tag>[A-Z]{1,16})\]\s*(?P<body>.*)$")
_CHECK = re.compile(r"^(?P<check>[A-Za-z0-9_*][A-Za-z0-9_* ./-]{0,47}):\s*(?P<message>.*)$")
_RANKS = re.compile(r"rank\(s\)\s*\{(?P<ranks>[^}]*)\}")
_COMM = re.compile(r"\bin comm (?P<comm>0x[0-9a-fA-F]+)\b")


@dataclass(frozen=True)
class DiagFinding:
    """One result line of NCCL's report."""

    status: str  # the tag: OK, INFO (documented), or another as printed
    check: str  # "p2p", "GPU inventory", "NCCL environment" ...; "" when the line names none
    message: str  # the rest of the line, cut at MAX_MESSAGE_CHARS
    ranks: tuple[int, ...] = ()  # the ranks the line names (`rank(s) {...}`), in the communicator's numbering
    ranks_cut: bool = False  # the rank list ended with an ellipsis: more ranks share the value
    comm: str | None = None  # the communicator the line names (`in comm 0x1234`)
    host: str | None = None  # who printed a RAS report (`host:pid`), None for an active report's lines

    @property
    def needs_review(self) -> bool:
        return self.status != OK


def report_lines(text: str) -> list[str]:
    """The lines of `text` that belong to NCCL's diagnostics report, in order (at most MAX_REPORT_LINES)."""
    return [line for line in text.splitlines() if PREFIX in line and _LINE.match(line)][:MAX_REPORT_LINES]


def parse_report(lines: list[str] | str) -> list[DiagFinding]:
    """Every result line of the report, in order (at most MAX_FINDINGS); headers, completion lines and
    other text are skipped."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    found = []
    for line in lines:
        finding = parse_line(line)
        if finding is not None:
            found.append(finding)
            if len(found) == MAX_FINDINGS:
                break
    return found


def parse_line(line: str) -> DiagFinding | None:
    """One report line read, or None when it is no result line (a header, a completion line, other text)."""
    matched = _LINE.match(line.rstrip("\r\n"))
    if matched is None or not matched.group("rest"):
        return None
    tagged = _TAGGED.match(matched.group("rest"))
    if tagged is None:
        return None
    body = tagged.group("body").strip()
    named = _CHECK.match(body)
    check, message = (named.group("check").strip(), named.group("message").strip()) if named else ("", body)
    ranks, cut = _ranks(message)
    comm = _COMM.search(message)
    return DiagFinding(tagged.group("tag"), check, _cut(message), ranks, cut, comm.group("comm") if comm else None,
                       matched.group("host"))


def _ranks(message: str) -> tuple[tuple[int, ...], bool]:
    """The ranks of a `rank(s) {0,1,2}` group, and whether the list was cut short (an ellipsis in it)."""
    group = _RANKS.search(message)
    if group is None:
        return (), False
    items = [item.strip() for item in group.group("ranks").split(",")]
    ranks = tuple(dict.fromkeys(int(item) for item in items
                                 if item.isascii() and item.isdigit() and len(item) <= 9))
    return ranks, any(item in (CUT, "\u2026") or item.endswith((CUT, "\u2026")) for item in items)


def _cut(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + CUT
