"""Runs that measure each point more than once: --cycles passes and --split groups.

The end of such a run says, per point, how far the cycles spread (min, median, max busbw and the
cycle of the minimum: a link that fails once an hour shows as one low cycle) and which group was
slowest. Lines are returned; render/live.py prints them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from nccl_bench.render.labels import placement_text
from nccl_bench.results.schema import ResultRow
from nccl_bench.sweep.sweep_config import option_name
from nccl_bench.units import stats
from nccl_bench.units.sizes import format_size


def cycle_line(cycle: int, cycles: int) -> str:
    """Where a --cycles run is: '# cycle 2 of 5', or '# cycle 7 (until interrupted)' for --cycles 0."""
    return f"# cycle {cycle} of {cycles}" if cycles else f"# cycle {cycle} (until interrupted)"


def _point(row: ResultRow) -> str:
    where = f"{row.op} {placement_text(row.placement)} {format_size(row.size_bytes)}"
    return f"{where} [{row.group}]" if row.group else where


def cycle_spread_lines(rows: Iterable[ResultRow]) -> list[str]:
    """Per point measured in two or more cycles: busbw min, median, max and the cycle of the minimum."""
    by_point: dict[tuple, list[ResultRow]] = defaultdict(list)
    for row in rows:
        if row.cycle is not None and row.busbw_gbps is not None:
            by_point[(row.op, row.placement, row.size_bytes, row.group)].append(row)
    spread = [measured for measured in by_point.values() if len({r.cycle for r in measured}) > 1]
    if not spread:
        return []
    lines = [f"# busbw across {max(len(m) for m in spread)} cycles (GB/s): min (its cycle) / median / max"]
    for measured in spread:
        low = min(measured, key=lambda r: (r.busbw_gbps, r.cycle))
        values = [r.busbw_gbps for r in measured]
        lines.append(f"#   {_point(low)}: {low.busbw_gbps:.3f} (cycle {low.cycle}) / "
                     f"{stats.median(values):.3f} / {max(values):.3f}")
    return lines


def slowest_group_lines(rows: Iterable[ResultRow]) -> list[str]:
    """Per point (and cycle) measured by two or more --split groups: the group with the lowest busbw."""
    by_point: dict[tuple, list[ResultRow]] = defaultdict(list)
    for row in rows:
        if row.group and row.busbw_gbps is not None:
            by_point[(row.op, row.placement, row.size_bytes, row.cycle)].append(row)
    lines = []
    for measured in by_point.values():
        if len(measured) < 2:
            continue
        slowest = min(measured, key=lambda r: r.busbw_gbps)
        median = stats.median([r.busbw_gbps for r in measured])
        cycle = "" if slowest.cycle is None else f" in cycle {slowest.cycle}"
        lines.append(f"#   {slowest.op} {placement_text(slowest.placement)} {format_size(slowest.size_bytes)}"
                     f"{cycle}: {slowest.group} at {slowest.busbw_gbps:.3f} GB/s "
                     f"(median of {len(measured)} groups {median:.3f})")
    return ["# slowest group per point:"] + lines if lines else []


def fastest_variant_lines(rows: Iterable[ResultRow]) -> list[str]:
    """--nccl-env's answer: per op and size, the fastest variant and by how much it beat the next."""
    from nccl_bench.sweep.variants import fastest_variants

    found = fastest_variants(rows)
    if not found:
        return []
    lines = [f"# fastest {option_name('nccl_env')} variant per point (busbw; time per op without one):"]
    for point in found:
        where = f"{point.op} {placement_text(point.placement)} {format_size(point.size_bytes)}"
        where += f" [{point.group}]" if point.group else ""
        if point.on_busbw:
            values = f"{point.best.busbw_gbps:.4g} GB/s vs {point.runner_up.busbw_gbps:.4g}"
        else:
            values = f"{point.best.time_us:.4g} us vs {point.runner_up.time_us:.4g}"
        lines.append(f"#   {where}: {point.best.variant}, {point.margin:.0%} faster than "
                     f"{point.runner_up.variant} ({values})")
    return lines


def late_lines(rows: Iterable[ResultRow]) -> list[str]:
    """Per op, placement, group and late rank: '# rank 2 (node002) arrived 310 us late at 1K-64K (all_reduce
    in, 3 of 4 sizes)': the rank the others waited for inside the op, its median lateness over those rows."""
    measured: dict[tuple, list[ResultRow]] = defaultdict(list)
    late: dict[tuple, list[ResultRow]] = defaultdict(list)
    for row in rows:
        if row.time_us is None:
            continue
        where = (row.op, row.placement, row.group, row.variant)
        measured[where].append(row)
        if row.late_rank is not None:
            late[(*where, row.late_rank)].append(row)
    lines = []
    for (op, placement, group, variant, rank), found in late.items():
        sizes = sorted({r.size_bytes for r in found})
        of = len({r.size_bytes for r in measured[(op, placement, group, variant)]})
        span = format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}-{format_size(sizes[-1])}"
        host = f" ({found[0].late_host})" if found[0].late_host else ""
        lateness = stats.median([r.late_us for r in found if r.late_us is not None] or [0.0])
        context = ", ".join(part for part in (f"{op} {placement_text(placement)}", group, variant) if part)
        lines.append(f"# rank {rank}{host} arrived {lateness:,.0f} us late at {span} ({context}, "
                     f"{len(sizes)} of {of} sizes): the others waited for it inside the op")
    return lines
