"""nccl-tests' text layout written from ResultRows, so a run can sit beside an nccl-tests log.

Follows nccl-tests' src/util.cu (writeResultHeader, writeBenchmarkLine*, writeResultFooter): per
size one line with the out-of-place then the in-place half, names and units on two header rows,
and an `# Avg bus bandwidth` footer, the mean busbw over every half printed.
"""

from __future__ import annotations

from typing import Any

from nccl_bench.render.escape import one_line
from nccl_bench.results.nccltests_log import EXPORT_MARK
from nccl_bench.results.nccltests_rows import DTYPE_TO_TYPE
from nccl_bench.results.schema import (
    PLACEMENT_IN,
    PLACEMENT_OUT,
    ResultRow,
)
from nccl_bench.units import op_table, stats
from nccl_bench.units.sizes import format_size


def _float_str(value: float | None, width: int) -> str:
    """nccl-tests getFloatStr: two decimals, fewer when the width would overflow, then exponent."""
    if value is None:
        return "N/A".rjust(width)
    for text in (f"{value:{width}.2f}", f"{value:{width}.1f}", f"{value:{width}.0f}"):
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def _g(value: float) -> str:
    """C's %g."""
    return f"{value:g}"


def _half(row: ResultRow | None) -> str:
    if row is None:
        return " " * 32  # writeBenchMarkLineNullBody
    # as writeBenchmarkLineBody: "  %6g" for a count, "    N/A" (one column narrower) when unchecked
    wrong = "    N/A" if row.wrong is None else f"  {_g(row.wrong):>6}"
    return f"  {_float_str(row.time_us, 7)}  {_float_str(row.algbw_gbps, 6)}  {_float_str(row.busbw_gbps, 6)}{wrong}"


def _header(op: str, rows: list[ResultRow], meta: dict[str, Any] | None) -> list[str]:
    """nccl-tests' header, with only what the run recorded: no Pid, no invented host or warmup."""
    binary = op_table.binary_of(op)
    first = rows[0]
    config = (meta or {}).get("config") or {}
    measured = [r for r in rows if r.iters]
    iters = {r.iters for r in measured}
    sizes = [r.size_bytes for r in rows]
    settings = f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)}"
    if isinstance(config.get("warmup"), int):
        settings += f" warmup iters: {config['warmup']}"
    if len(iters) == 1:
        settings += f" iters: {iters.pop()}"
    settings += f" validation: {0 if all(r.wrong is None for r in rows) else 1}"
    if isinstance(config.get("cuda_graph"), int):
        settings += f" graph: {config['cuda_graph']}"
    lines = [f"# Collective test starting: {binary}", settings]
    if len(iters) > 1:  # calibrated per size: say so rather than print one number for all
        per_size = ", ".join(f"{format_size(r.size_bytes)} {r.iters}" for r in measured)
        lines.append(f"# {EXPORT_MARK} iters per size: {per_size}")
    lines += ["#", "# Using devices"]
    hostnames = (meta or {}).get("hostnames") or []
    devices = (meta or {}).get("devices") or []
    for rank in range(first.world_size or 0):  # None: the input did not say
        host = f" on {hostnames[rank]}" if rank < len(hostnames) else ""
        device = f" [{devices[rank]}]" if rank < len(devices) else ""
        lines.append(one_line(f"#  Rank {rank:2d}{host} device{device} nccl_bench {first.backend}"))
    lines += [
        "#",
        f"# {EXPORT_MARK} ranks' times combined by {first.agg}",
        "#",
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place"
        "                       in-place          ",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        f"  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"
        f"  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6} ",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}"
        f"  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6} ",
    ]
    return lines


def format_text(rows: list[ResultRow], meta: dict[str, Any] | None = None) -> str:
    """The nccl-tests text layout, one block per op/world size, in the order the rows came.

    `meta` is the run's meta.json when the input was a run folder: warmup, hostnames and
    devices come from it; without it they are left out, never made up.
    """
    groups: dict[tuple[str, int], list[ResultRow]] = {}
    for row in rows:
        groups.setdefault((row.op, row.world_size), []).append(row)
    out: list[str] = []
    for (op, _), group in groups.items():
        out += _header(op, group, meta)
        lines: dict[tuple, dict[str, ResultRow]] = {}
        for row in group:
            if row.time_us is None:
                continue  # nccl-tests has no way to print a point that was not measured
            lines.setdefault((row.size_bytes, row.dtype, row.redop, row.root), {})[row.placement] = row
        busbws = []
        for (size_bytes, dtype, redop, root), halves in lines.items():
            some = next(iter(halves.values()))
            type_name = DTYPE_TO_TYPE.get(dtype, dtype)
            root_text = f"{root:6d}"
            out.append(
                f"{size_bytes:12d}  {some.count:12d}  {type_name:>8}  {redop:>6}  {root_text:>6}"
                f"{_half(halves.get(PLACEMENT_OUT))}{_half(halves.get(PLACEMENT_IN))}".rstrip()
            )
            for half in halves.values():
                if half.busbw_gbps is not None:
                    busbws.append(half.busbw_gbps)
        average = stats.mean(busbws) if busbws else 0.0  # nccl-tests prints 0 for an empty table
        out.append(f"# {'Out of bounds values':<20} : {0} OK")
        out.append(f"# {'Avg bus bandwidth':<20} : {_g(average)} ")
        out.append("#")
        out.append(f"# Collective test concluded: {op_table.binary_of(op)}")
        out.append("")
    return "\n".join(out)

