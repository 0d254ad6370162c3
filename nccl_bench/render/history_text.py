"""The history's answers as text: show's table and JSON, check's lines, JSON, Markdown and JUnit, diff's
table and JSON, nodes' table and JSON. Formatters return text and lines; the CLI prints them and writes
the files."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from nccl_bench.history.changes import Change
from nccl_bench.history.hosts import HostSummary
from nccl_bench.history.rule import ACCEPTED, REGRESSION, TOO_FEW, TOO_NOISY
from nccl_bench.history.series import SeriesSummary, describe, system_label, where
from nccl_bench.render.escape import markdown_text
from nccl_bench.render.fit import Column, render_lines
from nccl_bench.results.whole_file import strict_json
from nccl_bench.units.sizes import format_size


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _change(summary: SeriesSummary) -> str:
    change = summary.verdict.change
    return "-" if change is None else f"{100 * change:+.1f}%"


def _state(summary: SeriesSummary) -> str:
    verdict = summary.verdict
    if verdict.status == REGRESSION and verdict.flagged_by == "drift":
        return "drift"
    if verdict.status == REGRESSION and verdict.step_runs > 1:
        return f"step x{verdict.step_runs}"
    return {TOO_FEW: "too few runs", TOO_NOISY: "too noisy"}.get(verdict.status, verdict.status)


def too_noisy_text(summary: SeriesSummary) -> str:
    """Why a series was not judged although it has runs enough: its band, and what steadies it."""
    verdict = summary.verdict
    band = 100 * (1 - verdict.threshold_gbps / verdict.median_gbps)
    # Rounded, a band within half a percent of the whole figure reads "more than 100%", which no drop is.
    allowed = "no drop short of the whole figure" if band >= 99.5 else f"only a drop of more than {band:.0f}%"
    return (f"{where(summary.key)}: too noisy to judge: its runs wander so far that {allowed} would be flagged; "
            "more --trials, longer --min-sample-ms or a quieter host steady them")


def age_seconds(started_utc: str, now_utc: str) -> float | None:
    """How long before `now_utc` a run started (None: a time that does not parse)."""
    try:
        return (datetime.fromisoformat(now_utc) - datetime.fromisoformat(started_utc)).total_seconds()
    except (TypeError, ValueError):
        return None


def age_text(started_utc: str, now_utc: str) -> str:
    seconds = age_seconds(started_utc, now_utc)
    if seconds is None:
        return "age unknown"
    if seconds < 120:
        return f"{max(0, seconds):.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} days ago"


def judged_runs(found: Sequence[SeriesSummary]) -> list[tuple[str, str, int]]:
    """(run id, started, series) of each run judged, newest first: a CI job sees which run it judged."""
    counts: dict[tuple[str, str], int] = {}
    for s in found:
        counts[(s.latest.started_utc, s.latest.run_id)] = counts.get((s.latest.started_utc, s.latest.run_id), 0) + 1
    return [(run_id, started, n) for (started, run_id), n in sorted(counts.items(), reverse=True)]


def check_lines(found: Sequence[SeriesSummary], now_utc: str) -> list[str]:
    """The judged run(s) with their age, accepted runs with their reasons, and the count line."""
    lines = []
    runs = judged_runs(found)
    for run_id, started, n in runs[:3]:
        lines.append(f"judged run {run_id[:12]} (started {started}, {age_text(started, now_utc)}) in {n} series")
    if len(runs) > 3:
        lines.append(f"... and {len(runs) - 3} older run(s): series whose latest run is older")
    for s in found:
        if s.verdict.status == ACCEPTED:
            lines.append(f"accepted: {where(s.key)}: run {s.latest.run_id[:12]} is the new normal: {s.latest.accepted}")
    noisy = [s for s in found if s.verdict.status == TOO_NOISY]
    lines += [too_noisy_text(s) for s in noisy[:3]]
    if len(noisy) > 3:
        lines.append(f"... and {len(noisy) - 3} more series too noisy to judge")
    counted = {status: sum(s.verdict.status == status for s in found)
               for status in (REGRESSION, TOO_FEW, ACCEPTED, TOO_NOISY)}
    judged = len(found) - counted[TOO_FEW] - counted[TOO_NOISY] - counted[ACCEPTED]
    lines.append(f"{counted[REGRESSION]} regression(s) in {len(found)} series ({judged} judged, "
                 f"{counted[TOO_FEW]} with too few runs, {counted[TOO_NOISY]} too noisy, {counted[ACCEPTED]} accepted)")
    return lines


def check_json(found: Sequence[SeriesSummary], now_utc: str) -> str:
    return strict_json({
        "judged_runs": [{"run_id": run_id, "started_utc": started, "age_s": age_seconds(started, now_utc),
                         "series": n} for run_id, started, n in judged_runs(found)],
        "regressions": sum(s.verdict.status == REGRESSION for s in found),
        "series": [s.as_json() for s in found]}, indent=2)


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
             _gbps(s.latest.busbw_gbps), _gbps(s.verdict.median_gbps), _gbps(s.min_gbps), _gbps(s.max_gbps), _change(s),
             _state(s)] for s in found]
    return render_lines(SHOW_COLUMNS, rows, width)


def show_json(total_runs: int, found: Sequence[SeriesSummary]) -> str:
    return strict_json({"runs": total_runs, "series": [s.as_json() for s in found]}, indent=2)


def _changed_text(changes: Sequence[Change]) -> str:
    return "; ".join(str(c) for c in changes) or "-"


def check_markdown(found: Sequence[SeriesSummary], now_utc: str) -> str:
    failed = [s for s in found if s.verdict.status == REGRESSION]
    lines = [f"### nccl-bench history check: {len(failed)} regression(s) in {len(found)} series", ""]
    lines += [f"- {markdown_text(line)}" for line in check_lines(found, now_utc)[:-1]]
    lines += ["", "| op | size | system | run | latest (GB/s) | reference (GB/s) | band (GB/s) | change | verdict "
              "| changed |", "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for s in found:
        cells = [s.key["op"], format_size(s.key["size_bytes"]), system_label(s.key), s.latest.run_id[:12],
                 _gbps(s.latest.busbw_gbps), _gbps(s.verdict.median_gbps), _gbps(s.verdict.threshold_gbps), _change(s),
                 _state(s), _changed_text(s.changed)]
        lines.append("| " + " | ".join(markdown_text(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def check_junit(found: Sequence[SeriesSummary]) -> str:
    """One testcase per series: a regression is a <failure>, a series with too few runs <skipped>."""
    import xml.etree.ElementTree as ET

    failures = sum(s.verdict.status == REGRESSION for s in found)
    skipped = sum(s.verdict.status in (TOO_FEW, TOO_NOISY) for s in found)
    counts = {"tests": str(len(found)), "failures": str(failures), "errors": "0", "skipped": str(skipped)}
    root = ET.Element("testsuites", {**counts, "time": "0.0"})
    suite = ET.SubElement(root, "testsuite", {"name": "nccl_bench.history", **counts, "time": "0"})
    for s in found:
        name = f"{s.key['op']} {s.key['placement']} {format_size(s.key['size_bytes'])} {system_label(s.key)}"
        case = ET.SubElement(suite, "testcase", {"name": name, "classname": f"nccl_bench.history.{s.key['op']}"})
        if s.verdict.status == REGRESSION:
            ET.SubElement(case, "failure", {"message": describe(s), "type": REGRESSION}).text = describe(s)
        elif s.verdict.status == TOO_FEW:
            ET.SubElement(case, "skipped", {"message": f"{len(s.verdict.reference)} earlier run(s): too few to judge"})
        elif s.verdict.status == TOO_NOISY:
            ET.SubElement(case, "skipped", {"message": too_noisy_text(s)})
    return ET.tostring(root, encoding="unicode") + "\n"


DIFF_COLUMNS = (
    Column("op", align="left"), Column("placement", align="left", priority=3), Column("size", "(B)"),
    Column("dtype", align="left", priority=4), Column("system", align="left", priority=2), Column("A", "(GB/s)"),
    Column("B", "(GB/s)"), Column("change"),
)


def diff_rows(keys: dict[str, dict[str, Any]], before: dict[str, float], after: dict[str, float],
              op: str | None) -> list[tuple[dict[str, Any], float | None, float | None]]:
    """(series key, A's busbw, B's busbw) of every series either run has, in reading order."""
    names = [n for n in keys if (op is None or keys[n]["op"] == op)]
    names.sort(key=lambda n: (keys[n]["op"], keys[n]["placement"], int(keys[n]["size_bytes"]), n))
    return [(keys[n], before.get(n), after.get(n)) for n in names]


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a <= 0 else b / a - 1


# Parts of a series' key the table shows only where its rows differ in them: two runs of other world sizes,
# node counts or backends have series of one op, size and system that would otherwise read as the same row.
DIFF_APART = (("world_size", Column("ranks")), ("nodes", Column("nodes")),
              ("backend", Column("backend", align="left")))


def diff_lines(runs, rows, changed: Sequence[Change], width: int | None) -> list:
    (a_id, a_started, *_), (b_id, b_started, *_) = runs
    head = [f"A: run {a_id[:12]} ({a_started})", f"B: run {b_id[:12]} ({b_started})"]
    apart = [(name, column) for name, column in DIFF_APART if len({str(k[name]) for k, _, _ in rows}) > 1]
    columns = (*DIFF_COLUMNS[:4], *(column for _, column in apart), *DIFF_COLUMNS[4:])
    table = [[k["op"], k["placement"], format_size(k["size_bytes"]), k["dtype"], *(str(k[name]) for name, _ in apart),
              system_label(k), _gbps(a), _gbps(b), "-" if _ratio(a, b) is None else f"{100 * _ratio(a, b):+.1f}%"]
             for k, a, b in rows]
    what = [f"changed: {c}" for c in changed] or ["changed: nothing recorded (versions, variables, hosts, GPUs, "
                                                  "settings)"]
    return [*head, *(render_lines(columns, table, width) if table else ["no series in common or apart"]), *what]


def diff_json(runs, rows, changed: Sequence[Change]) -> str:
    return strict_json({
        "a": {"run_id": runs[0][0], "started_utc": runs[0][1]}, "b": {"run_id": runs[1][0], "started_utc": runs[1][1]},
        "series": [{**k, "a_busbw_gbps": a, "b_busbw_gbps": b,
                    "change_pct": None if _ratio(a, b) is None else 100 * _ratio(a, b)} for k, a, b in rows],
        "changed": [c.as_json() for c in changed]}, indent=2)


NODES_COLUMNS = (Column("host", align="left"), Column("runs"), Column("flagged"), Column("kinds", align="left"),
                 Column("last flagged (UTC)", align="left", priority=1), Column("late rows"),
                 Column("late median (us)"))


def nodes_lines(hosts: Sequence[HostSummary], width: int | None) -> list:
    if not hosts:
        return ["no doctor runs or rows with their hosts in the store yet"]
    rows = [[h.host, str(h.runs), str(h.flagged), ", ".join(f"{k} x{n}" for k, n in h.kinds.items()) or "-",
             h.last_flagged_utc or "-", late_rows_text(h), late_median_text(h)] for h in hosts]
    return render_lines(NODES_COLUMNS, rows, width)


def late_rows_text(host: HostSummary) -> str:
    """'2/14': rows that named the host late, of the rows it took part in; '-' where it took part in none."""
    return f"{host.late_rows}/{host.rows}" if host.rows or host.late_rows else "-"


def late_median_text(host: HostSummary) -> str:
    return "-" if host.late_median_us is None else f"{host.late_median_us:.1f}"


def nodes_json(hosts: Sequence[HostSummary]) -> str:
    return strict_json({"hosts": [_host_json(h) for h in hosts]}, indent=2)


def _host_json(host: HostSummary) -> dict[str, Any]:
    return {"host": host.host, "runs": host.runs, "flagged": host.flagged, "kinds": host.kinds,
            "last_flagged_utc": host.last_flagged_utc, "rows": host.rows, "late_rows": host.late_rows,
            "late_median_us": host.late_median_us}
