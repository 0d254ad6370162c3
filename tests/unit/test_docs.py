"""The README is a front door and the docs hold together: every relative link in README.md and
docs/*.md reaches a file (and a heading, when it names one), the README stays short with both set-up
commands near its top, and its exit-code table is the one errors.py defines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nccl_bench import errors

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

README_MAX_LINES = 350  # about hyperfine's: what it is, a demo, set-up, commands by example, links
SET_UP_WITHIN_LINES = 60
SET_UP_COMMANDS = ("bash scripts/dev.sh sweep ", "bash scripts/dev.sh test ")

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"\[(?:[^\]]*)\]\(([^)\s]+)\)")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def _prose_lines(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks, with inline code spans removed."""
    kept, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(_CODE_SPAN.sub("", line))
    return kept


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as GitHub gives it."""
    seen: dict[str, int] = {}
    anchors = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            count = seen.get(slug, 0)
            anchors.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return anchors


def _relative_links(path: Path) -> list[str]:
    return [target for line in _prose_lines(path) for target in _LINK.findall(line) if not _EXTERNAL.match(target)]


def test_the_pages_have_links_to_check():
    assert len(PAGES) > 10
    assert len(_relative_links(README)) > 10


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    dead = []
    for target in _relative_links(page):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            dead.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            dead.append(f"{target}: no heading with that anchor in {resolved.relative_to(ROOT)}")
    assert dead == []


def test_every_docs_page_is_in_the_index():
    index = ROOT / "docs" / "README.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for target in _relative_links(index)}
    assert [p.name for p in PAGES[1:] if p != index and p.resolve() not in linked] == []


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES


def test_both_set_up_commands_are_near_the_top():
    top = README.read_text(encoding="utf-8").splitlines()[:SET_UP_WITHIN_LINES]
    for command in SET_UP_COMMANDS:
        assert any(line.startswith(command) for line in top), command


def test_the_exit_code_table_is_the_one_errors_defines():
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Exit codes")
    rows = [line for line in lines[start:] if re.match(r"^\| \d+ \|", line)]
    codes = [int(row.split("|")[1]) for row in rows]
    defined = sorted(value for name, value in vars(errors).items() if name.startswith("EXIT_"))
    assert codes == defined


HEALTH_STATES = {0: "ok", 1: "warning", 2: "critical", 3: "unknown"}  # Nagios' plugin convention


def _health_rows() -> list[tuple[int, int, str]]:
    """docs/doctor.md's health-check table: (doctor's exit code, the check's code, the check's word)."""
    lines = (ROOT / "docs" / "doctor.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## Exit codes in a health check")
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if cells and cells[0].isdigit():
            code, word = cells[2].split(" ", 1)
            rows.append((int(cells[0]), int(code), word))
    return rows


def test_the_doctor_health_check_table_covers_every_exit_code_errors_defines():
    rows = _health_rows()
    defined = sorted(value for name, value in vars(errors).items() if name.startswith("EXIT_"))
    assert sorted({doctor for doctor, _, _ in rows}) == defined
    assert all(HEALTH_STATES[code] == word for _, code, word in rows), rows
    states = {doctor: {code for d, code, _ in rows if d == doctor} for doctor, _, _ in rows}
    assert states[errors.EXIT_OK] == {0} and states[errors.EXIT_BAD_INPUT] == {3}  # bad arguments: unknown
    assert states[errors.EXIT_VERDICT] == {1, 2}  # told apart by doctor.json's exclude list


def test_the_doctor_health_check_example_does_what_the_table_says():
    text = (ROOT / "docs" / "doctor.md").read_text(encoding="utf-8")
    section = text[text.index("## Exit codes in a health check"):text.index("## What it measures")]
    arms = {int(code): arm for code, arm in re.findall(r"^\s+(\d+)\) (.*);;$", section, re.M)}
    rows = _health_rows()
    for doctor in {d for d, _, _ in rows}:
        states = sorted({code for d, code, _ in rows if d == doctor})
        arm = arms.get(doctor, "exit 3 ")  # the example's `*)` arm
        assert sorted(map(int, re.findall(r"exit (\d+)", arm))) == states, (doctor, arm)
    assert "*) exit 3 ;;" in section and "exclude" in arms[errors.EXIT_VERDICT]
