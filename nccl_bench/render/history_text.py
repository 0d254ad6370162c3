"""The store's answers as text: show's table and JSON, check's Markdown and JUnit, nodes' table and
JSON. Formatters return text and lines; the CLI prints them and writes the files."""

from __future__ import annotations

import json
from typing import Any, Sequence

from nccl_bench.history.hosts import HostSummary
from nccl_bench.history.rule import REGRESSION, TOO_FEW
from nccl_bench.history.series import SeriesSummary, describe, system_label
from nccl_bench.render.escape import markdown_text
from nccl_bench.render.fit import Column, render_lines
from nccl_bench.units.sizes import format_size


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _change(summary: SeriesSummary) -> str:
    change = summary.verdict.change
    return "-" if change is None else f"{100 * change:+.1f}%"


def _state(summary: SeriesSummary) -> str:
    verdict = summary.verdict
    if verdict.status == REGRESSION and verdict.step_runs > 1:
        return f"step x{verdict.step_runs}"
    return {TOO_FEW: "too few runs"}.get(verdict.status, verdict.status)


SHOW_COLUMNS = (
    Column("op", align="left"), Column("placement", align="left", priority=3), Column("size", "(B)"),
    Column("dtype", align="left", priority=4), Column("ranks", priority=5), Column("nodes", priority=6),
    Column("system", align="left", priority=2), Column("runs"), Column("latest", "(GB/s)"),
    Column("median", "(GB/s)"), Column("min", "(GB/s)", priority=7), Column("max", "(GB/s)", priority=7),
    Column("change"), Column("verdict", align="left"),
)


def show_lines(found: Sequence[SeriesSummary], width: int | None) -> list:
    if not found:
        return ["no series in the store yet (nccl-bench history add RUN, or a sweep records itself)"]
    rows = [[s.key["op"], s.key["placement"], format_size(s.key["size_bytes"]), s.key["dtype"],
             str(s.key["world_size"]), str(s.key["nodes"]), system_label(s.key), str(s.runs),
             _gbps(s.latest.busbw_gbps), _gbps(s.median_gbps), _gbps(s.min_gbps), _gbps(s.max_gbps), _change(s),
             _state(s)] for s in found]
    return render_lines(SHOW_COLUMNS, rows, width)


def show_json(total_runs: int, found: Sequence[SeriesSummary]) -> str:
    return json.dumps({"runs": total_runs, "series": [s.as_json() for s in found]}, indent=2)


def check_markdown(found: Sequence[SeriesSummary]) -> str:
    failed = [s for s in found if s.verdict.status == REGRESSION]
    lines = [f"### nccl-bench history check: {len(failed)} regression(s) in {len(found)} series", "",
             "| op | size | system | latest (GB/s) | median (GB/s) | change | verdict |",
             "| --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for s in found:
        cells = [s.key["op"], format_size(s.key["size_bytes"]), system_label(s.key), _gbps(s.latest.busbw_gbps),
                 _gbps(s.verdict.median_gbps), _change(s), _state(s)]
        lines.append("| " + " | ".join(markdown_text(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def check_junit(found: Sequence[SeriesSummary]) -> str:
    """One testcase per series: a regression is a <failure>, a series with too few runs <skipped>."""
    import xml.etree.ElementTree as ET

    failures = sum(s.verdict.status == REGRESSION for s in found)
    skipped = sum(s.verdict.status == TOO_FEW for s in found)
    counts = {"tests": str(len(found)), "failures": str(failures), "errors": "0", "skipped": str(skipped)}
    root = ET.Element("testsuites", {**counts, "time": "0.0"})
    suite = ET.SubElement(root, "testsuite", {"name": "nccl_bench.history", **counts, "time": "0"})
    for s in found:
        name = f"{s.key['op']} {s.key['placement']} {format_size(s.key['size_bytes'])} {system_label(s.key)}"
        case = ET.SubElement(suite, "testcase", {"name": name, "classname": f"nccl_bench.history.{s.key['op']}"})
        if s.verdict.status == REGRESSION:
            ET.SubElement(case, "failure", {"message": describe(s), "type": REGRESSION}).text = describe(s)
        elif s.verdict.status == TOO_FEW:
            ET.SubElement(case, "skipped", {"message": f"{s.runs} run(s): too few to judge"})
    return ET.tostring(root, encoding="unicode") + "\n"


NODES_COLUMNS = (Column("host", align="left"), Column("runs"), Column("flagged"), Column("kinds", align="left"),
                 Column("last flagged (UTC)", align="left", priority=1))


def nodes_lines(hosts: Sequence[HostSummary], width: int | None) -> list:
    if not hosts:
        return ["no doctor runs in the store yet"]
    rows = [[h.host, str(h.runs), str(h.flagged), ", ".join(f"{k} x{n}" for k, n in h.kinds.items()) or "-",
             h.last_flagged_utc or "-"] for h in hosts]
    return render_lines(NODES_COLUMNS, rows, width)


def nodes_json(hosts: Sequence[HostSummary]) -> str:
    return json.dumps({"hosts": [_host_json(h) for h in hosts]}, indent=2)


def _host_json(host: HostSummary) -> dict[str, Any]:
    return {"host": host.host, "runs": host.runs, "flagged": host.flagged, "kinds": host.kinds,
            "last_flagged_utc": host.last_flagged_utc}
