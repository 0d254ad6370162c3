"""`report --html`: one self-contained page to attach to a ticket or open on an offline cluster.

Everything is inline: CSS in a <style> block, plots as inline SVG (text drawn as paths, so no
font files), no script, no link to any other address. Per run: its set-up from meta.json, the
average busbw per op, the results table with the terminal table's headings (render/labels.py),
%peak, the plot; with two runs a compare verdict (nccl_bench.comparison); and the doctor's pair
matrix when the run folder holds a doctor.json.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from nccl_bench import comparison as cmp
from nccl_bench.errors import UserInputError
from nccl_bench.render import labels
from nccl_bench.render.tables import (
    average_busbw,
    flags_text,
    repeats_in,
    result_cells,
    result_columns,
    sample_span,
)
from nccl_bench.results.rank_times import RankPoint, read_rank_points
from nccl_bench.results.run_folder import DOCTOR_JSON
from nccl_bench.results.schema import STATUS_UNSUPPORTED, STATUS_WRONG, ResultRow
from nccl_bench.results.whole_file import read_json_or_none
from nccl_bench.units.sizes import format_size

DOCTOR_SCHEMA_VERSIONS = (1, 2, 3)  # 2 and 3 only added keys (missing suspects, expected_hosts, exclude; config)

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #1b1b1b; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { padding: 0.15em 0.6em; border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
th { background: #f2f2f2; text-align: left; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; font-size: 0.9em; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; }
.bad { color: #b00020; font-weight: 600; } .warn { color: #8a5a00; } .good { color: #1b7a1b; }
.verdict { padding: 0.4em 0.8em; border-radius: 4px; display: inline-block; font-weight: 600; }
.verdict.bad { background: #fde7ea; } .verdict.good { background: #e6f4e6; }
figure { margin: 0.8em 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #555; font-size: 0.9em; }
"""

RANK_HEATMAP_NOTE = (
    "Left: each rank's time inside the op over the point's median (red: it waited longer; blue: less). "
    "Right: its arrival offset, how long after the earliest rank it called the op. A rank that arrives late "
    "spends the least time inside (blue, bright on the right); cells outlined in black are where the row names "
    "it late (late_rank).")

_VERDICT_CLASS = {
    cmp.VERDICT_REGRESSION: "bad", cmp.VERDICT_WRONG: "bad", cmp.VERDICT_NOISY: "warn",
    cmp.VERDICT_OK: "good", cmp.VERDICT_FASTER: "good",
}


@dataclass(frozen=True)
class RunPage:
    """One input of the report: its label, rows, and what its folder recorded beside them."""

    label: str
    rows: Sequence[ResultRow]
    meta: dict[str, Any] | None = None
    doctor: dict[str, Any] | None = None
    ranks: Sequence[RankPoint] = ()  # ranks.csv's points (a sweep's folder); none for other inputs


def pages_for(paths: Sequence[Path], loaded: Sequence[tuple[str, Sequence[ResultRow]]]) -> list[RunPage]:
    """One RunPage per input, with the meta.json and doctor.json its folder holds, if any."""
    from nccl_bench.render.formats import run_meta

    runs = zip(paths, loaded, strict=True)
    return [RunPage(label, rows, run_meta(path), read_doctor(path), read_rank_points(path))
            for path, (label, rows) in runs]


def doctor_only(path: Path) -> dict[str, Any] | None:
    """doctor.json of a doctor's run folder (one without results.csv), or None for any other input."""
    folder = Path(path)
    return read_doctor(folder) if folder.is_dir() and not (folder / "results.csv").exists() else None


def read_doctor(path: Path) -> dict[str, Any] | None:
    """doctor.json of a run folder (schema_version 1 to 3), or None when there is none or it is unreadable."""
    data = read_json_or_none(Path(path) / DOCTOR_JSON) if Path(path).is_dir() else None
    return data if isinstance(data, dict) and data.get("schema_version") in DOCTOR_SCHEMA_VERSIONS else None


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _meta_items(page: RunPage) -> list[tuple[str, str]]:
    meta = page.meta or {}
    rows = page.rows
    items: list[tuple[str, str]] = []
    if meta:
        hosts = ", ".join(sorted(set(meta.get("hostnames") or [])))
        items += [
            ("status", meta.get("status")),
            ("started (UTC)", meta.get("started_utc")),
            ("backend", meta.get("backend") and f"{meta['backend']} via {meta.get('launcher')}"),
            ("ranks", meta.get("world_size") and f"{meta['world_size']} on {meta.get('nodes')} node(s): {hosts}"),
            ("devices", ", ".join(sorted(set(meta.get("devices") or [])))),
            ("versions", ", ".join(f"{k} {v}" for k, v in (meta.get("versions") or {}).items())),
            ("sizes", meta.get("sizes")),
            ("iterations", meta.get("iterations")),
            ("peak", (meta.get("peak") or {}).get("label")),
            ("command", " ".join(meta.get("command_line") or [])),
        ]
    elif rows:
        first = rows[0]
        items += [("backend", first.backend), ("ranks", f"{first.world_size or 'unknown'} on {first.nodes} node(s)")]
    span = sample_span(rows)
    if span is not None:
        items.append(("samples lasted", f"{span[0]:,.0f} to {span[1]:,.0f} ms"))
    measured = [r for r in rows if r.busbw_gbps is not None]
    if measured:
        best = max(measured, key=lambda r: r.busbw_gbps)
        where = f"{best.op} {format_size(best.size_bytes)} {labels.placement_text(best.placement)}"
        text = f"{best.busbw_gbps:.2f} GB/s ({where})"
        if best.pct_of_peak is not None:
            text += f" = {best.pct_of_peak:.1f}% of {best.peak_gbps:.1f} GB/s"
        items.append(("best busbw", text))
    return [(k, str(v)) for k, v in items if v]


def _results_table(rows: Sequence[ResultRow]) -> str:
    repeats = repeats_in(rows)
    columns = result_columns(repeats)
    head = "".join(
        f'<th class="{"num" if c.align == "right" else ""}">{_e(f"{c.name} {c.unit}".strip())}</th>'
        for c in columns
    )
    body = []
    for row in rows:
        cells = []
        for column, cell in zip(columns, result_cells(row, repeats), strict=True):
            text = flags_text(row) if column.name == labels.name("flags") else str(cell)
            css = "num" if column.align == "right" else ""
            if column.name == labels.name("flags") and text:
                css = "bad" if row.status == STATUS_WRONG else "warn" if row.status != STATUS_UNSUPPORTED else "note"
            cells.append(f'<td class="{css}">{_e(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="results"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _average_lines(rows: Sequence[ResultRow]) -> str:
    items = "".join(
        f"<li>{_e(op)}, {_e(labels.placement_text(placement))}: {value:.3f} GB/s</li>"
        for (op, placement), value in average_busbw(rows).items()
    )
    if not items:
        return ""
    return f"<p>Average bus bandwidth (as nccl-tests' <code># Avg bus bandwidth</code>):</p><ul>{items}</ul>"


def _plot(runs: Sequence[tuple[str, Sequence[ResultRow]]]) -> str:
    if not any(r.busbw_gbps is not None for _, rows in runs for r in rows):
        return ""
    from nccl_bench.render import plots

    if not plots.have_matplotlib():
        return f'<p class="note">No plot: {_e(plots.MATPLOTLIB_MISSING)}.</p>'
    svg = plots.figure_svg(runs, title=" vs ".join(label for label, _ in runs))
    return f'<figure class="plot">{svg}</figure>'


def _rank_heatmap(page: RunPage) -> str:
    """Every rank's time in the op and arrival at every size (render/rank_heatmap.py), where ranks.csv has them."""
    if not page.ranks:
        return ""
    from nccl_bench.render import plots, rank_heatmap

    if not plots.have_matplotlib():
        return f'<p class="note">No rank heatmap: {_e(plots.MATPLOTLIB_MISSING)}.</p>'
    panels = rank_heatmap.rank_panels(page.label, page.ranks, page.rows)
    svg = plots.svg_of(lambda: rank_heatmap.rank_figure(panels))
    return ("<h3>Every rank at every size (ranks.csv)</h3>"
            f'<p class="note">{_e(RANK_HEATMAP_NOTE)}</p><figure class="plot">{svg}</figure>')


def _comparison(baseline: RunPage, current: RunPage) -> str:
    try:
        result = cmp.compare_rows(list(baseline.rows), list(current.rows),
                                  baseline_label=baseline.label, current_label=current.label)
    except UserInputError as exc:
        why = f"{_e(baseline.label)} and {_e(current.label)} cannot be compared: {_e(exc)}"
        return f'<h2>Compare</h2><p class="note">{why}</p>'
    css = "bad" if result.failures else "good"
    from nccl_bench.render.compare_exports import NUMERIC_HEADINGS, comparison_cells, comparison_headings

    numeric = ["num" if h in NUMERIC_HEADINGS else "" for h in comparison_headings()]
    head = "".join(f'<th class="{css}">{_e(h)}</th>' for h, css in zip(comparison_headings(), numeric, strict=True))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{css}">{_e(c)}</td>' for c, css in zip(comparison_cells(row)[:-1], numeric, strict=False)
        )
        + f'<td class="{_VERDICT_CLASS.get(row.verdict, "note")}">{_e(row.verdict)}</td></tr>'
        for row in result.rows
    )
    notes = "".join(f'<p class="note">note: {_e(n)}</p>' for n in result.notes)
    return (
        f"<h2>Compare: {_e(current.label)} against baseline {_e(baseline.label)}</h2>"
        f'<p class="verdict {css}">{_e(result.summary())}</p>{notes}'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def doctor_matrix(doctor: dict[str, Any]) -> tuple[list[str], dict[tuple[str, str], list[dict[str, Any]]]]:
    """Hosts in doctor.json's order (its `nodes`, then any host only a pair names) and, per unordered
    host pair, its measured entries (one per rail)."""
    nodes: list[str] = []
    for node in doctor.get("nodes") or []:
        host = node.get("host") if isinstance(node, dict) else None
        if host is not None and str(host) not in nodes:
            nodes.append(str(host))
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pair in doctor.get("pairs") or []:
        hosts = [str(h) for h in (pair.get("hosts") or [])] if isinstance(pair, dict) else []
        if len(hosts) != 2:
            continue
        for host in hosts:
            if host not in nodes:
                nodes.append(host)
        a, b = sorted(hosts, key=nodes.index)
        cells.setdefault((a, b), []).append(pair)
    return nodes, cells


# doctor.json's verdicts: the run's (healthy or suspects) and each node's or pair's (ok or suspect).
_DOCTOR_CLASS = {"healthy": "good", "ok": "good", "suspects": "bad", "suspect": "bad", "contended": "bad"}


def _doctor_cell(entries: list[dict[str, Any]]) -> str:
    parts = []
    for entry in entries:
        value, rail = entry.get("busbw_gbps"), entry.get("rail")
        number = f"{value:.1f}" if isinstance(value, (int, float)) else "n/a"
        text = ("" if rail is None else f"rail {rail}: ") + number
        verdict = str(entry.get("verdict", ""))
        css = _DOCTOR_CLASS.get(verdict, "warn")
        parts.append(f'<span class="{css}" title="{_e(verdict)}">{_e(text)}</span>')
    return f'<td class="num">{"<br>".join(parts)}</td>'


def _doctor(doctor: dict[str, Any]) -> str:
    nodes, cells = doctor_matrix(doctor)
    head = "<th></th>" + "".join(f"<th>{_e(n)}</th>" for n in nodes)
    body = []
    for i, a in enumerate(nodes):
        tds = ['<td class="note">-</td>' if i == j else _doctor_cell(cells.get((a, b) if i < j else (b, a), []))
               for j, b in enumerate(nodes)]
        body.append(f"<tr><th>{_e(a)}</th>{''.join(tds)}</tr>")
    from nccl_bench.render.doctor_text import recorded_suspect_line

    suspects = "".join(
        f"<li>{_e(recorded_suspect_line(s) if isinstance(s, dict) else s)}</li>" for s in doctor.get("suspects") or []
    )
    verdict = doctor.get("verdict")
    wall_s = doctor.get("wall_s")
    return (
        "<h3>Doctor: pairs of nodes (busbw GB/s)</h3>"
        f'<p class="verdict {_DOCTOR_CLASS.get(str(verdict), "warn")}">doctor verdict: {_e(verdict)}</p>'
        + (f"<p>Suspects:</p><ul>{suspects}</ul>" if suspects else "")
        + f"<table class=\"doctor\"><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        + (f'<p class="note">doctor took {wall_s:.0f} s</p>' if isinstance(wall_s, (int, float)) else "")
    )


def _run_section(page: RunPage, with_plot: bool) -> str:
    meta = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in _meta_items(page))
    parts = [f"<section class=\"run\"><h2>Run: {_e(page.label)}</h2>", f'<dl class="meta">{meta}</dl>']
    parts.append(_average_lines(page.rows))
    if with_plot:
        parts.append(_plot([(page.label, page.rows)]))
    parts.append(_results_table(page.rows))
    parts.append(_rank_heatmap(page))
    if page.doctor is not None:
        parts.append(_doctor(page.doctor))
    parts.append("</section>")
    return "".join(parts)


def html_report(pages: Sequence[RunPage]) -> str:
    """The whole page as text; ends with a newline."""
    import nccl_bench

    title = "nccl-bench report: " + ", ".join(p.label for p in pages)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">nccl-bench {_e(nccl_bench.__version__)}. GB/s = 1e9 bytes/s; size in bytes, time per op in '
        "microseconds; busbw as nccl-tests defines it; %peak = busbw as a share of the peak in each row.</p>",
    ]
    if len(pages) == 2:
        parts.append(_comparison(pages[0], pages[1]))
    if len(pages) > 1:
        parts.append("<h2>All runs</h2>" + _plot([(p.label, p.rows) for p in pages]))
    for page in pages:
        parts.append(_run_section(page, with_plot=len(pages) == 1))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
