"""Renderings of a Comparison: a rich table for the terminal, Markdown, JUnit XML and JSON.

Every format is a function from a Comparison to a renderable or a string; the files are written by
results' writers (the CLI checks output paths with formats.check_output_file before any work).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from nccl_bench import comparison as cmp
from nccl_bench.option_types import percent
from nccl_bench.render import labels
from nccl_bench.render.escape import markdown_text
from nccl_bench.render.fit import Column, render_lines
from nccl_bench.results.schema import row_to_record
from nccl_bench.results.whole_file import append_text, strict_json, write_text_file

if TYPE_CHECKING:
    from rich.text import Text

JSON_FORMAT_VERSION = 1
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
JUNIT_SUITE_NAME = "nccl-bench compare"

_VERDICT_STYLE = {
    cmp.VERDICT_REGRESSION: "bold red",
    cmp.VERDICT_WRONG: "bold red",
    cmp.VERDICT_NOISY: "yellow",
    cmp.VERDICT_OK: "green",
    cmp.VERDICT_FASTER: "bold green",
    cmp.VERDICT_UNSUPPORTED: "dim",
    cmp.VERDICT_NO_DATA: "dim",
    cmp.VERDICT_ONLY_BASELINE: "magenta",
    cmp.VERDICT_ONLY_CURRENT: "magenta",
}
# One table for the terminal and Markdown; names and units from render/labels.py. On a narrow
# terminal redop leaves first, then type, "judged on" and placement; no number is ever cut.
_COLUMNS = (
    Column(labels.name("op"), align="left"),
    Column(labels.heading("size_bytes")),
    Column(labels.name("dtype"), align="left", priority=3),
    Column(labels.name("redop"), align="left", priority=4),
    Column(labels.name("placement"), align="left", priority=1),
    Column("judged on", align="left", priority=2),
    Column("baseline"),
    Column("current"),
    Column("delta"),
    Column("verdict", align="left", wrap=True),  # "missing in baseline" folds rather than push placement out
)
_HEADERS = tuple(column.name for column in _COLUMNS)
NUMERIC_HEADINGS = frozenset({labels.heading("size_bytes"), "baseline", "current", "delta"})


def comparison_headings() -> tuple[str, ...]:
    return _HEADERS


def comparison_cells(row: cmp.RowComparison) -> list[str]:
    """One compared row as text, in _HEADERS order: shared by the terminal, Markdown and HTML."""
    return _cells(row)


def _cells(row: cmp.RowComparison) -> list[str]:
    key = row.key
    return [
        key.op + (f" [{key.variant}]" if key.variant else ""),  # --nccl-env's variants: each a point of its own
        f"{key.size_bytes:,}",
        key.dtype,
        key.redop,
        labels.placement_text(key.placement),
        _metric_label(row.metric),
        _value(row.baseline_value),
        _value(row.current_value),
        "" if row.delta_pct is None else f"{row.delta_pct:+.1f}%",
        row.verdict,
    ]


def comparison_lines(comparison: cmp.Comparison, width: int | None) -> list["Text"]:
    """Title, then baseline, current, delta and verdict per row fitted to `width`; worse deltas red, better green."""
    from rich.text import Text

    rows = []
    for row in comparison.rows:
        cells: list = _cells(row)
        cells[8] = Text(cells[8], style=_delta_style(row))
        cells[9] = Text(cells[9], style=_VERDICT_STYLE.get(row.verdict, ""))
        rows.append(cells)
    return [Text(f"{comparison.current_label} vs {comparison.baseline_label}")] + render_lines(_COLUMNS, rows, width)


def failure_lines(comparison: cmp.Comparison) -> list[str]:
    """One line per failing row, naming it and giving the numbers."""
    return [f"{row.verdict}: {row.key.label()}: {row.reason}" for row in comparison.failures]


def to_markdown(comparison: cmp.Comparison) -> str:
    """A GitHub-flavoured Markdown report: heading, summary line, one table row per compared row."""
    outcome = "regression" if comparison.failures else "ok"
    lines = [
        f"### nccl-bench compare: {outcome}",
        "",
        markdown_text(comparison.summary()),
        "",
        f"Baseline: `{_name(comparison, 'baseline')}`, current: `{_name(comparison, 'current')}`.",
    ]
    lines += [f"Note: {markdown_text(note)}" for note in comparison.notes]
    lines += ["", "| " + " | ".join(_HEADERS) + " |"]
    lines.append("|" + "|".join("---:" if h in NUMERIC_HEADINGS else "---" for h in _HEADERS) + "|")
    for row in comparison.rows:
        cells = [markdown_text(c) for c in _cells(row)]
        if row.failed:
            cells[9] = f"**{cells[9]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_junit_xml(comparison: cmp.Comparison) -> str:
    """One testcase per row: failing verdicts are <failure> with the numbers, unjudged rows <skipped>.

    Built with the standard library's ElementTree in one pass over the rows, so the file's cost grows
    linearly with their number.
    """
    import xml.etree.ElementTree as ET

    unjudged = {cmp.VERDICT_UNSUPPORTED, cmp.VERDICT_NO_DATA, cmp.VERDICT_ONLY_BASELINE, cmp.VERDICT_ONLY_CURRENT}
    failures = sum(row.failed for row in comparison.rows)
    skipped = sum(not row.failed and row.verdict in unjudged for row in comparison.rows)
    nothing = not comparison.judged  # one error case: a CI reading the file must not see all-skipped as a pass
    counts = {"tests": str(len(comparison.rows) + nothing), "failures": str(failures), "errors": str(int(nothing)),
              "skipped": str(skipped)}
    root = ET.Element("testsuites", {**counts, "time": "0.0"})
    suite = ET.SubElement(root, "testsuite", {"name": JUNIT_SUITE_NAME, **counts, "time": "0"})
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("baseline", _name(comparison, "baseline")), ("current", _name(comparison, "current")),
        ("tolerance", percent(comparison.tolerance)), ("min_bytes", str(comparison.min_bytes)),
    ):
        ET.SubElement(properties, "property", {"name": name, "value": value})
    for row in comparison.rows:
        names = {"name": row.key.label(), "classname": f"nccl_bench.compare.{row.key.op}"}
        case = ET.SubElement(suite, "testcase", names)
        if row.failed:
            ET.SubElement(case, "failure", {"message": row.reason, "type": row.verdict}).text = row.reason
        elif row.verdict in unjudged:
            ET.SubElement(case, "skipped", {"message": f"{row.verdict}: {row.reason}"})
        ET.SubElement(case, "system-out").text = row.reason or row.verdict
    if nothing:
        case = ET.SubElement(suite, "testcase", {"name": "rows judged", "classname": "nccl_bench.compare"})
        ET.SubElement(case, "error", {"message": comparison.summary(), "type": "not_judged"})
    return ET.tostring(root, encoding="unicode") + "\n"


def to_json(comparison: cmp.Comparison) -> dict[str, Any]:
    """The comparison for machines; `baseline`/`current` are the paths as given (no option word)."""
    return {
        "format_version": JSON_FORMAT_VERSION,
        "baseline": _name(comparison, "baseline"),
        "current": _name(comparison, "current"),
        "tolerance": comparison.tolerance,
        "min_bytes": comparison.min_bytes,
        "exit_code": comparison.exit_code,
        "summary": comparison.summary(),
        "counts": comparison.counts(),
        "notes": list(comparison.notes),
        "rows": [_json_row(row) for row in comparison.rows],
    }


def _json_row(row: cmp.RowComparison) -> dict[str, Any]:
    return {
        "op": row.key.op,
        "size_bytes": row.key.size_bytes,
        "dtype": row.key.dtype,
        "redop": row.key.redop,
        "placement": row.key.placement,
        "world_size": row.key.world_size,
        "variant": row.key.variant,
        "verdict": row.verdict,
        "failed": row.failed,
        "metric": row.metric,
        "baseline_value": row.baseline_value,
        "current_value": row.current_value,
        "delta_pct": row.delta_pct,
        "ranges_overlap": row.ranges_overlap,
        "reason": row.reason,
        "baseline_row": None if row.baseline is None else row_to_record(row.baseline),
        "current_row": None if row.current is None else row_to_record(row.current),
    }


def write_exports(
    comparison: cmp.Comparison,
    markdown: Path | None = None,
    junit: Path | None = None,
    json_path: Path | None = None,
) -> list[Path]:
    """Write the requested files; returns the paths written."""
    written = []
    for path, render in (
        (markdown, to_markdown),
        (junit, to_junit_xml),
        (json_path, lambda c: strict_json(to_json(c), indent=2, default=str) + "\n"),
    ):
        if path is not None:
            write_text_file(path, render(comparison))
            written.append(Path(path))
    return written


def step_summary_path(environ: Mapping[str, str]) -> Path | None:
    """The file GitHub Actions renders on the run page, when running there."""
    value = environ.get(STEP_SUMMARY_ENV, "").strip()
    return Path(value) if value else None


def append_step_summary(comparison: cmp.Comparison, path: Path) -> None:
    """Append (never overwrite: other steps of the job write there too)."""
    append_text(path, to_markdown(comparison) + "\n")


def _name(comparison: cmp.Comparison, side: str) -> str:
    """The input as given (a path), for files; the label (with its option word) when there is no path."""
    return getattr(comparison, f"{side}_path") or getattr(comparison, f"{side}_label")


def _metric_label(metric: str | None) -> str:
    """'busbw (GB/s)' or 'time (us)': the heading the results table gives that column."""
    return labels.heading(metric) if metric else ""


def _value(value: float | None) -> str:
    if value is None:
        return ""
    # nccl-tests prints two decimals; below 1 that would hide the change (CPU busbw is often 0.0x)
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3g}"


def _delta_style(row: cmp.RowComparison) -> str:
    if row.delta_pct is None or row.delta_pct == 0:
        return ""
    better = (row.delta_pct > 0) == (row.metric == cmp.METRIC_BUSBW)
    return "green" if better else "red"
