"""`history html`: one self-contained page (inline CSS and SVG, nothing fetched) with a trend plot per op
and size, regressions marked, and each host's doctor record. Every text from the store is escaped.

The page draws each series' window (the newest runs the check judges), never the whole history, so
its size stays bounded however long the store grows (other tools' dashboards took minutes to hours
to re-render a large history).
"""

from __future__ import annotations

import html
from itertools import groupby
from typing import Sequence

from nccl_bench.history.hosts import HostSummary
from nccl_bench.history.rule import REGRESSION
from nccl_bench.history.series import SeriesSummary, describe, system_label
from nccl_bench.units.sizes import format_size

WIDTH, HEIGHT, PAD = 560, 200, 36
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")
STYLE = ("body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td.l,th.l{text-align:left}"
         ".bad{color:#c00;font-weight:bold}figure{display:inline-block;margin:0 1em 1em 0}")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(found: Sequence[SeriesSummary], hosts: Sequence[HostSummary], total_runs: int, metas=None, now_utc="") -> str:
    failed = [s for s in found if s.verdict.status == REGRESSION]
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<title>nccl-bench history</title>", f"<style>{STYLE}</style></head><body>",
             f"<h1>nccl-bench history</h1><p>{total_runs} run(s) stored, {len(found)} series, "
             f"<span class=\"{'bad' if failed else ''}\">{len(failed)} regression(s)</span>.</p>"]
    if failed:
        parts.append("<ul>" + "".join(f"<li class=\"bad\">{_e(describe(s))}</li>" for s in failed) + "</ul>")
    parts.append("<h2>Trends</h2>")
    ordered = sorted(found, key=lambda s: (s.key["op"], s.key["size_bytes"]))
    for (op, size), group in groupby(ordered, key=lambda s: (s.key["op"], s.key["size_bytes"])):
        parts.append(_figure(f"{op} {format_size(size)}", list(group)))
    parts.append(_hosts_table(hosts))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _figure(title: str, group: list[SeriesSummary]) -> str:
    values = [p.busbw_gbps for s in group for p in s.window]
    top = max(values) * 1.1 or 1.0
    longest = max(len(s.window) for s in group)
    step = (WIDTH - 2 * PAD) / max(1, longest - 1)
    body, legend = [], []
    for index, summary in enumerate(group):
        color = COLORS[index % len(COLORS)]
        offset = longest - len(summary.window)  # the newest runs of every series line up on the right
        xy = [(PAD + (offset + i) * step, HEIGHT - PAD - (p.busbw_gbps / top) * (HEIGHT - 2 * PAD))
              for i, p in enumerate(summary.window)]
        body.append(f"<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\""
                    + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + "\"/>")
        for (x, y), point in zip(xy, summary.window, strict=True):
            body.append(f"<circle cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"2.5\" fill=\"{color}\"><title>"
                        f"{_e(point.started_utc)} run {_e(point.run_id[:12])}: {point.busbw_gbps:.3g} GB/s</title>"
                        "</circle>")
        if summary.verdict.status == REGRESSION:
            first = len(summary.window) - summary.verdict.step_runs
            for x, y in xy[first:]:
                body.append(f"<circle class=\"regression\" cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"6\" fill=\"none\" "
                            "stroke=\"#c00\" stroke-width=\"2\"/>")
        key = summary.key
        legend.append(f"<span style=\"color:{color}\">&#9632;</span> {_e(key['placement'])} {_e(key['dtype'])} "
                      f"{_e(key['world_size'])} ranks on {_e(system_label(key))} ({_e(key['backend'])})")
    axes = (f"<line x1=\"{PAD}\" y1=\"{HEIGHT - PAD}\" x2=\"{WIDTH - PAD}\" y2=\"{HEIGHT - PAD}\" stroke=\"#999\"/>"
            f"<line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{HEIGHT - PAD}\" stroke=\"#999\"/>"
            f"<text x=\"2\" y=\"{PAD - 6}\" font-size=\"10\">{top:.3g} GB/s</text>"
            f"<text x=\"{PAD}\" y=\"{HEIGHT - 8}\" font-size=\"10\">older runs</text>"
            f"<text x=\"{WIDTH - PAD - 50}\" y=\"{HEIGHT - 8}\" font-size=\"10\">newest</text>")
    svg = (f"<svg width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\">"
           + axes + "".join(body) + "</svg>")
    return (f"<figure><figcaption><b>{_e(title)}</b> busbw</figcaption>{svg}<br>"
            + "<br>".join(legend) + "</figure>")


def _hosts_table(hosts: Sequence[HostSummary]) -> str:
    if not hosts:
        return "<h2>Hosts</h2><p>No doctor runs stored.</p>"
    rows = "".join(
        f"<tr><td class=\"l\">{_e(h.host)}</td><td>{h.runs}</td><td class=\"{'bad' if h.flagged else ''}\">"
        f"{h.flagged}</td><td class=\"l\">{_e(', '.join(f'{k} x{n}' for k, n in h.kinds.items()) or '-')}</td>"
        f"<td class=\"l\">{_e(h.last_flagged_utc or '-')}</td></tr>" for h in hosts)
    return ("<h2>Hosts (doctor)</h2><table><tr><th class=\"l\">host</th><th>runs</th><th>flagged</th>"
            f"<th class=\"l\">kinds</th><th class=\"l\">last flagged (UTC)</th></tr>{rows}</table>")
