"""`history html`: one self-contained page (inline CSS, SVG and one small script; nothing fetched).

At the top, the regressions with what changed; then a filter by system and op; then one plot per
series on a time axis with dates: its runs (hover: run, date, value, versions, verdict, in an SVG
<title> that needs no script), the band a run must stay above (the rule's threshold at each run),
marks where versions changed and where a person accepted a change (with the reason), and the
regressed runs circled in red; last, each host's doctor record. Every text from the history is escaped.

The page draws each series' newest runs (what the check walks), never the whole history, so its
size follows the series and the window, not the store (other tools' dashboards took minutes to hours
to re-render a large history).
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any, Sequence

from nccl_bench.history.changes import Change, differences
from nccl_bench.history.hosts import HostSummary
from nccl_bench.history.rule import ACCEPTED, REGRESSION, TOO_FEW, TOO_NOISY
from nccl_bench.history.series import SeriesSummary, describe, system_label
from nccl_bench.render.history_text import late_median_text, late_rows_text
from nccl_bench.units.sizes import format_size

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 620, 230, 58, 16, 14, 40
STYLE = ("body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td.l,th.l{text-align:left}"
         ".bad{color:#c00;font-weight:bold}figure.series{display:inline-block;margin:0 1em 1.5em 0;vertical-align:top}"
         "figcaption{font-size:13px;max-width:620px}.filter{margin:1em 0;padding:.5em;background:#f4f4f4}"
         "svg text{font-size:10px;fill:#444}.band{fill:#fbe3e3}.limit{fill:none;stroke:#d88;stroke-dasharray:4 2}"
         ".run{stroke:#fff;stroke-width:.5}.run:hover{stroke:#000;stroke-width:1.5}"
         ".mark-version{stroke:#888;stroke-dasharray:2 3}.mark-accept{stroke:#2a2;stroke-width:2}")
# Hides the plots the filter leaves out, and keeps the choice in the address (#system=...&op=...) so a
# filtered page can be linked; the page reads whole without it (every plot shown).
SCRIPT = ("function nbFilter(){var s=document.getElementById('nb-system').value,"
          "o=document.getElementById('nb-op').value,n=0;"
          "document.querySelectorAll('figure.series').forEach(function(f){"
          "var show=(!s||f.dataset.system===s)&&(!o||f.dataset.op===o);f.style.display=show?'':'none';if(show)n++;});"
          "document.getElementById('nb-shown').textContent=n;"
          "history.replaceState(null,'','#'+new URLSearchParams({system:s,op:o}).toString());}"
          "(function(){var h=new URLSearchParams(location.hash.slice(1));"
          "['system','op'].forEach(function(k){var e=document.getElementById('nb-'+k);"
          "if(h.get(k)&&Array.from(e.options).some(function(x){return x.value===h.get(k);}))e.value=h.get(k);});"
          "if(h.get('system')||h.get('op'))nbFilter();})();")
VERSION_PREFIX = " version"
# The widest a character of the labels draws in the page's 10px sans-serif text (DejaVu Sans' digits and
# the letters of "accepted" are at most 0.64 em, 6.4 px; Arial's digits 5.6 px; Chromium drew "2025-05-28"
# 51.6 px wide): a label's width is bounded by its length times this, and labels closer than that bound
# plus LABEL_GAP_PX are thinned out.
CHAR_PX = 6.5
LABEL_GAP_PX = 8
ACCEPTED_LABEL = "accepted"
MINUTE, HOUR, DAY = 60, 3600, 86400
# The time axis' steps, each with the label it gets: a run a minute apart and a year of daily runs both get
# ticks at round times, as many as the labels' width allows (matplotlib's AutoDateLocator chooses alike).
TIME_STEPS = tuple((seconds, "%m-%d %H:%M") for seconds in (MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR,
                                                             3 * HOUR, 6 * HOUR, 12 * HOUR)) + tuple(
    (days * DAY, "%Y-%m-%d") for days in (1, 2, 7, 14, 30, 61, 91, 182, 365, 730, 1825))


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(found: Sequence[SeriesSummary], hosts: Sequence[HostSummary], total_runs: int,
         metas: dict[str, dict[str, Any]] | None = None, now_utc: str = "") -> str:
    metas = metas or {}
    failed = [s for s in found if s.verdict.status == REGRESSION]
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<title>nccl-bench history</title>", f"<style>{STYLE}</style></head><body>",
             f"<h1>nccl-bench history</h1><p>{total_runs} run(s) stored, {len(found)} series, "
             f"<span class=\"{'bad' if failed else ''}\" id=\"nb-regressions\">{len(failed)} regression(s)</span>"
             f"{f' (page made {_e(now_utc)})' if now_utc else ''}.</p>"]
    if failed:
        parts.append("<h2>Regressions</h2><ul id=\"nb-regression-list\">"
                     + "".join(f"<li class=\"bad\">{_e(describe(s))}</li>" for s in failed) + "</ul>")
    parts.append(_filter(found))
    parts.append("<h2>Series</h2><p>Each point is a run (hover for its run, date, value and versions); the "
                 "shaded band is what a run must stay above (the check's threshold at that run); a dotted line "
                 "marks changed versions, a green line an accepted change; red rings are regressions.</p>")
    parts.extend(_figure(summary, metas) for summary in found)
    parts.append(_hosts_table(hosts))
    parts.append(f"<script>{SCRIPT}</script></body></html>\n")
    return "\n".join(parts)


def _filter(found: Sequence[SeriesSummary]) -> str:
    systems = sorted({system_label(s.key) for s in found})
    ops = sorted({str(s.key["op"]) for s in found})

    def options(values: list[str]) -> str:
        return "<option value=\"\">all</option>" + "".join(f"<option value=\"{_e(v)}\">{_e(v)}</option>"
                                                          for v in values)

    return (f"<div class=\"filter\"><label>system <select id=\"nb-system\" onchange=\"nbFilter()\">{options(systems)}"
            f"</select></label> <label>op <select id=\"nb-op\" onchange=\"nbFilter()\">{options(ops)}</select>"
            f"</label> <span id=\"nb-shown\">{len(found)}</span> series shown</div>")


def _time(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


def _versions(meta: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted((meta.get("versions") or {}).items()))
    env = ", ".join(f"{k}={v}" for k, v in sorted((meta.get("env") or {}).items()))
    return "; ".join(part for part in (versions, env) if part) or "versions not recorded"


def _version_changes(summary: SeriesSummary, metas: dict[str, dict[str, Any]]) -> list[tuple[int, list[Change]]]:
    """(index, changes) of each run whose versions or NCCL variables differ from the run before it."""
    marks = []
    for index in range(1, len(summary.window)):
        before, after = metas.get(summary.window[index - 1].run_id), metas.get(summary.window[index].run_id)
        if before is None or after is None:
            continue
        changed = [c for c in differences(after, [before])
                   if c.what.endswith(VERSION_PREFIX) or c.what.startswith(("NCCL_", "TORCH_"))]
        if changed:
            marks.append((index, changed))
    return marks


def _figure(summary: SeriesSummary, metas: dict[str, dict[str, Any]]) -> str:
    key, points, verdicts = summary.key, summary.window, summary.verdicts
    times = [_time(p.started_utc) for p in points]
    if any(t is None for t in times):  # a start the history cannot read: runs in order, evenly spaced
        times = [float(i) for i in range(len(points))]
    low_t, high_t = min(times), max(times)
    span_t = (high_t - low_t) or 1.0
    limits = [v.threshold_gbps for v in verdicts]
    values = [p.busbw_gbps for p in points] + [x for x in limits if x is not None]
    top = max(values) * 1.08 or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(t: float) -> float:
        return LEFT + (t - low_t) / span_t * plot_w if high_t > low_t else LEFT + plot_w / 2

    def y_of(v: float) -> float:
        return TOP + plot_h - max(0.0, v) / top * plot_h

    body = [_axes(top, low_t, high_t, x_of, y_of, [p.started_utc for p in points])]
    band = [(x_of(t), y_of(limit)) for t, limit in zip(times, limits, strict=True) if limit is not None]
    if band:
        base = y_of(0)
        body.append("<polygon class=\"band\" points=\"" + " ".join(
            f"{x:.1f},{y:.1f}" for x, y in [(band[0][0], base), *band, (band[-1][0], base)]) + "\"><title>the band: a "
            "run below its upper edge is a regression</title></polygon>")
        body.append("<polyline class=\"limit\" points=\"" + " ".join(f"{x:.1f},{y:.1f}" for x, y in band) + "\"/>")
    for index, changed in _version_changes(summary, metas):
        x = x_of(times[index])
        body.append(f"<line class=\"mark-version\" x1=\"{x:.1f}\" y1=\"{TOP}\" x2=\"{x:.1f}\" y2=\"{TOP + plot_h}\">"
                    f"<title>{_e('; '.join(str(c) for c in changed))}</title></line>")
    accepted_xs = [x_of(times[index]) for index, point in enumerate(points) if point.accepted is not None]
    labelled = _accepted_labels(accepted_xs)
    for x, point in zip(accepted_xs, [point for point in points if point.accepted is not None], strict=True):
        body.append(f"<line class=\"mark-accept\" x1=\"{x:.1f}\" y1=\"{TOP}\" x2=\"{x:.1f}\" y2=\"{TOP + plot_h}\">"
                    f"<title>accepted as the new normal: {_e(point.accepted)}</title></line>")
        if x in labelled:  # every mark keeps its reason on hover; a label only where it has room
            body.append(f"<text x=\"{labelled[x]:.1f}\" y=\"{TOP + 10}\" fill=\"#2a2\">{ACCEPTED_LABEL}</text>")
    body.append("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\" points=\"" + " ".join(
        f"{x_of(t):.1f},{y_of(p.busbw_gbps):.1f}" for t, p in zip(times, points, strict=True)) + "\"/>")
    for t, point, verdict in zip(times, points, verdicts, strict=True):
        x, y = x_of(t), y_of(point.busbw_gbps)
        bad = verdict.status == REGRESSION
        state = {TOO_FEW: "too few runs to judge", TOO_NOISY: "too noisy to judge",
                 ACCEPTED: f"accepted: {point.accepted}"}.get(verdict.status, verdict.status)
        band_text = "" if verdict.threshold_gbps is None else f", band {verdict.threshold_gbps:.4g} GB/s"
        tip = (f"run {point.run_id[:12]}\n{point.started_utc}\n{point.busbw_gbps:.4g} GB/s ({state}{band_text})\n"
               f"{_versions(metas.get(point.run_id, {}))}")
        body.append(f"<circle class=\"run{' regression' if bad else ''}\" data-run=\"{_e(point.run_id)}\" "
                    f"cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"{4 if bad else 3}\" fill=\"{'#c00' if bad else '#1f77b4'}\">"
                    f"<title>{_e(tip)}</title></circle>")
        if bad:
            body.append(f"<circle cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"7\" fill=\"none\" stroke=\"#c00\" "
                        "stroke-width=\"1.5\"/>")
    title = (f"{key['op']} {key['placement']} {format_size(key['size_bytes'])} {key['dtype']}, {key['world_size']} "
             f"ranks, {key['nodes']} node(s), {key['backend']} on {system_label(key)}")
    verdict = summary.verdict
    said = {REGRESSION: "regression", TOO_FEW: "too few runs", TOO_NOISY: "too noisy",
            ACCEPTED: "accepted"}.get(verdict.status, "ok")
    return (f"<figure class=\"series\" data-system=\"{_e(system_label(key))}\" data-op=\"{_e(key['op'])}\">"
            f"<figcaption><b>{_e(title)}</b>: <span class=\"{'bad' if said == 'regression' else ''}\">{said}</span>"
            f"</figcaption><svg width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{_e(title)}\">"
            + "".join(body) + "</svg></figure>")


def _axes(top: float, low_t: float, high_t: float, x_of, y_of, stamps: list[str]) -> str:
    """Axes with busbw ticks and the time axis' labels (_time_labels)."""
    bottom, plot_right = y_of(0), WIDTH - RIGHT
    middle = (TOP + bottom) / 2
    parts = [f"<line x1=\"{LEFT}\" y1=\"{bottom:.1f}\" x2=\"{plot_right}\" y2=\"{bottom:.1f}\" stroke=\"#999\"/>",
             f"<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom:.1f}\" stroke=\"#999\"/>",
             f"<text x=\"10\" y=\"{middle:.0f}\" text-anchor=\"middle\" transform=\"rotate(-90 10 {middle:.0f})\">"
             "busbw (GB/s)</text>"]
    for fraction in (0.0, 0.5, 1.0):
        value = top / 1.08 * fraction
        y = y_of(value)
        parts.append(f"<text x=\"{LEFT - 4}\" y=\"{y + 3:.1f}\" text-anchor=\"end\">{value:.3g}</text>")
    for x, label, anchor in _time_labels(low_t, high_t, x_of, stamps):
        parts.append(f"<text class=\"date\" x=\"{x:.1f}\" y=\"{bottom + 14:.1f}\" text-anchor=\"{anchor}\">"
                     f"{_e(label)}</text>")
    parts.append(f"<text x=\"{(LEFT + plot_right) / 2:.0f}\" y=\"{HEIGHT - 6}\" text-anchor=\"middle\">run start "
                 "(UTC)</text>")
    return "".join(parts)


def _accepted_labels(xs: list[float]) -> dict[float, float]:
    """Mark x -> where its label starts: right of the mark, or left of it at the figure's right edge; a mark
    whose label would overlap another keeps only its line (and its reason on hover)."""
    width = len(ACCEPTED_LABEL) * CHAR_PX
    starts = [(x, x + 3 if x + 3 + width <= WIDTH else x - 3 - width) for x in sorted(xs)]
    return dict(_apart([(start, start + width, (x, start)) for x, start in starts])) if starts else {}


def _time_labels(low_t: float, high_t: float, x_of, stamps: list[str]) -> list[tuple[float, str, str]]:
    """(x, text, anchor) of the time axis' labels: at round times (TIME_STEPS), the finest step whose labels
    stand apart by their width, so no two overlap however the runs crowd (thousands a day, or a burst after
    a quiet month). Runs whose start cannot be read are evenly spaced: their first, middle and last dates."""
    if high_t <= low_t:  # one time: one label, where every run is drawn
        return [(x_of(low_t), stamps[0][:10], "middle")]
    if any(_time(stamp) is None for stamp in stamps):  # x is the run's index
        last = len(stamps) - 1
        return [(x_of(float(index)), stamps[index][:10], "start" if index == 0 else "end" if index == last else
                 "middle") for index in dict.fromkeys([0, last // 2, last])]
    plot_w = x_of(high_t) - x_of(low_t)
    for step, form in TIME_STEPS:
        width = len(_time_text(low_t, form)) * CHAR_PX
        if step / (high_t - low_t) * plot_w >= width + LABEL_GAP_PX or step == TIME_STEPS[-1][0]:
            break
    first = (int(low_t) // step + (int(low_t) % step > 0)) * step
    boxes = []
    for t in range(first, int(high_t) + 1, step):
        x = x_of(float(t))
        anchor, left = (("middle", x - width / 2) if width / 2 <= x <= WIDTH - width / 2 else
                        ("start", x) if x < width / 2 else ("end", x - width))  # kept inside the figure
        boxes.append((left, left + width, (x, _time_text(t, form), anchor)))
    if not boxes:  # the span is shorter than one step: the first run's time, where it is drawn
        return [(x_of(low_t), _time_text(low_t, form), "start")]
    return _apart(boxes)


def _apart(boxes: list[tuple[float, float, Any]]) -> list[Any]:
    """Of labels (left, right, what), left to right, those that start LABEL_GAP_PX past the last one kept;
    the last label is kept over the ones before it that it would overlap (the newest run's is read first)."""
    kept: list[tuple[float, float, Any]] = []
    for box in boxes:
        if not kept or box[0] >= kept[-1][1] + LABEL_GAP_PX:
            kept.append(box)
    if kept[-1] is not boxes[-1]:
        while kept and boxes[-1][0] < kept[-1][1] + LABEL_GAP_PX:
            kept.pop()
        kept.append(boxes[-1])
    return [what for _, _, what in kept]


def _time_text(t: float, form: str) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime(form)


def _hosts_table(hosts: Sequence[HostSummary]) -> str:
    if not hosts:
        return "<h2>Hosts</h2><p>No doctor runs or rows with their hosts stored.</p>"
    rows = "".join(
        f"<tr><td class=\"l\">{_e(h.host)}</td><td>{h.runs}</td><td class=\"{'bad' if h.flagged else ''}\">"
        f"{h.flagged}</td><td class=\"l\">{_e(', '.join(f'{k} x{n}' for k, n in h.kinds.items()) or '-')}</td>"
        f"<td class=\"l\">{_e(h.last_flagged_utc or '-')}</td><td class=\"{'bad' if h.late_rows else ''}\">"
        f"{late_rows_text(h)}</td><td>{late_median_text(h)}</td></tr>" for h in hosts)
    return ("<h2>Hosts (doctor, late rows)</h2><table><tr><th class=\"l\">host</th><th>runs</th><th>flagged</th>"
            "<th class=\"l\">kinds</th><th class=\"l\">last flagged (UTC)</th><th>late rows</th>"
            f"<th>late median (us)</th></tr>{rows}</table>")
