"""Renderables and JSON for `nccl-bench limits`; the CLI prints them."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from nccl_bench.hardware.detect import HostLimits, Peak
from nccl_bench.hardware.expected import Entry
from nccl_bench.hardware.host import MEMCPY_METHOD
from nccl_bench.render.fit import Column, render_lines
from nccl_bench.units.sizes import format_size


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def limits_json(limits: HostLimits, peak: Peak | None, peak_warnings: list[str],
                expected: Sequence[Entry] = ()) -> dict[str, Any]:
    """A plain dict: every field of the limits, the chosen peak, the public figures measured on such a
    system with their sources (hardware/expected.py; none when nothing fits), and all warnings."""
    data = dataclasses.asdict(limits)
    data["peak"] = dataclasses.asdict(peak) if peak else None
    data["expected"] = [_expected_json(entry) for entry in expected]
    data["warnings"] = list(dict.fromkeys([*limits.warnings, *peak_warnings]))
    data["units"] = "GB/s = 1e9 bytes/s, per direction"
    return data


# Priority: what leaves first on a narrow terminal (largest first); GPU, model and peak stay.
_GPU_COLUMNS = (
    Column("GPU"),
    Column("model", align="left"),
    Column("NVLink", priority=6),
    Column("active links", priority=3),
    Column("per link", "(GB/s)", priority=4),
    Column("NVLink total", "(GB/s)", priority=1),
    Column("PCIe", priority=5),
    Column("PCIe total", "(GB/s)", priority=2),
    Column("peak", "(GB/s)"),
    Column("source", align="left", priority=7),
)


def _expected_json(entry: Entry) -> dict[str, Any]:
    fields = ("id", "system", "op", "algorithm", "size_bytes", "size_basis", "busbw_gbps", "busbw_high_gbps", "kind",
              "nccl_version", "source_url")
    return {name: getattr(entry, name) for name in fields}


def expected_line(entry: Entry) -> str:
    """One public figure: op, size, busbw (a range where the source gives one), what it is, system, source."""
    figure = f"{entry.busbw_gbps:g}" + ("" if entry.busbw_high_gbps is None else f"-{entry.busbw_high_gbps:g}")
    what = {"measured": "measured", "threshold": "pass threshold", "stated": "stated peak"}[entry.kind]
    what += {"nvls": " with NVLS", "ring": " with rings"}.get(entry.algorithm, "")
    size = format_size(entry.size_bytes) + {"sweep_max": " (best up to it)", "peak": " (reached above it)"}.get(
        entry.size_basis, "")
    nccl = f", NCCL {entry.nccl_version}" if entry.nccl_version else ""
    return f"  {entry.op} {size}: {figure} GB/s {what}, {entry.system}{nccl} ({entry.source_url})"


def limits_lines(limits: HostLimits, peak: Peak | None, peak_warnings: list[str], width: int | None,
                 expected: Sequence[Entry] = ()) -> list:
    """A GPU table (or the no-GPU line), the peak line, the expected figures, NICs and warnings, in print order."""
    from rich.text import Text

    out: list = []
    if limits.gpus:
        out.append(Text(f"GPU links (source: {limits.source}; GB/s = 1e9 B/s, per direction)"))
        rows = []
        for g in limits.gpus:
            links = "-" if g.links_active is None else f"{g.links_active}/{g.links_total}"
            per_link = _num(g.link_gbps, "{:g}")
            if g.link_reported_gbps is not None and g.link_gbps is not None and g.link_reported_gbps != g.link_gbps:
                per_link += f" ({g.link_reported_gbps:g} reported)"
            pcie = "-" if g.pcie_gen is None else f"Gen{g.pcie_gen} x{g.pcie_width}"
            now = (g.pcie_gen_current, g.pcie_width_current)
            if g.pcie_gen_current is not None and now != (g.pcie_gen, g.pcie_width):
                pcie += f" (now Gen{g.pcie_gen_current} x{g.pcie_width_current})"
            rows.append([str(g.index), g.name or "?", f"{g.nvlink_gen}" if g.nvlink_gen else "-", links,
                         per_link, _num(g.nvlink_gbps), pcie, _num(g.pcie_gbps), _num(g.peak_gbps), g.source])
        out += render_lines(_GPU_COLUMNS, rows, width)
    else:
        why = "; ".join(limits.notes) if limits.notes else "nothing answered"
        out.append(Text(f"No NVIDIA GPU found ({why})."))
    if limits.memcpy_gbps is not None:
        out.append(Text(f"Host memory copy: {limits.memcpy_gbps:.2f} GB/s ({MEMCPY_METHOD})"))
        if limits.memcpy_run_gbps is not None and limits.memcpy_run_gbps < limits.memcpy_gbps:
            out.append(Text(f"  this run's own fastest copy: {limits.memcpy_run_gbps:.2f} GB/s (the host was busier)"))
    if peak is not None:
        out.append(Text(f"Peak to compare busbw with: {peak.peak_gbps:.2f} GB/s - {peak.label} [{peak.source}]",
                        style="bold"))
    else:
        out.append(Text("Peak to compare busbw with: unknown", style="bold"))
    if expected:
        out.append(Text("Measured on such systems (public figures, busbw; GB/s = 1e9 B/s):"))
        out += [Text(expected_line(entry)) for entry in expected]
    for port in limits.nic_ports:
        out.append(Text(f"NIC {port.name} ({port.kind}): {port.gbps:g} GB/s per direction"))
    for warning in dict.fromkeys([*limits.warnings, *peak_warnings]):
        out.append(Text(f"warning: {warning}", style="yellow"))
    return out
