"""The verdict files (--junit, --markdown) of a command that ended before it could judge: they say so,
so a CI job never reads an earlier run's green file as this run's verdict. JUnit's <error> is the
element its readers count as a broken test, apart from a <failure> (a regression)."""

from __future__ import annotations

from nccl_bench.render.escape import markdown_text


def junit(suite: str, why: str) -> str:
    """One testcase in error: the check ran, and could not judge."""
    import xml.etree.ElementTree as ET

    counts = {"tests": "1", "failures": "0", "errors": "1", "skipped": "0"}
    root = ET.Element("testsuites", {**counts, "time": "0.0"})
    case = ET.SubElement(ET.SubElement(root, "testsuite", {"name": suite, **counts, "time": "0"}), "testcase",
                         {"name": "judged", "classname": suite})
    ET.SubElement(case, "error", {"message": f"could not judge: {why}", "type": "not_judged"}).text = why
    return ET.tostring(root, encoding="unicode") + "\n"


def markdown(title: str, why: str) -> str:
    return f"### {markdown_text(title)}: could not judge\n\n{markdown_text(why)}\n"
