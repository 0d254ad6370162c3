"""`sweep --min-busbw`: the floor rule, pure (rows in, the rows below the floor out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nccl_bench.errors import EXIT_OK, EXIT_VERDICT
from nccl_bench.results.schema import STATUS_UNSUPPORTED, ResultRow
from nccl_bench.sweep.sweep_config import option_name
from nccl_bench.units.sizes import format_size


@dataclass(frozen=True)
class FloorCheck:
    """--min-busbw: each op's busbw at its largest measured size against one floor (GB/s = 1e9 B/s)."""

    floor_gbps: float
    checked: tuple[ResultRow, ...]  # every row at its op's largest measured size (both placements)
    below: tuple[ResultRow, ...]  # those of them under the floor
    unchecked_ops: tuple[str, ...]  # ops without one measured busbw (unsupported by the backend)

    @property
    def exit_code(self) -> int:
        return EXIT_VERDICT if self.below else EXIT_OK

    @property
    def option_text(self) -> str:
        return f"{option_name('min_busbw_gbps')} {self.floor_gbps:g} GB/s"

    def notes(self) -> list[str]:
        """One note per op that had nothing to check."""
        return [f"{op}: no size measured, so not checked against {self.option_text}" for op in self.unchecked_ops]

    def verdict(self) -> str:
        """The verdict in one line: the rows below the floor (an error), or the lowest row that reached it;
        '' when no row was checked."""
        if self.below:
            below = "; ".join(floor_row_text(row) for row in self.below)
            return f"below {self.option_text} at the op's largest measured size: {below}"
        if not self.checked:
            return ""
        lowest = min(self.checked, key=lambda row: row.busbw_gbps)
        return f"{self.option_text} reached at each op's largest measured size (lowest: {floor_row_text(lowest)})"


def check_floor(rows: Sequence[ResultRow], floor_gbps: float) -> FloorCheck:
    """The floor rule: per op, the largest size with a measured busbw; each of its rows must reach the floor."""
    ops = list(dict.fromkeys(r.op for r in rows if r.busbw_factor is not None or r.status == STATUS_UNSUPPORTED))
    checked: list[ResultRow] = []
    for op in ops:
        measured = [r for r in rows if r.op == op and r.busbw_gbps is not None]
        if measured:
            largest = max(r.size_bytes for r in measured)
            checked += [r for r in measured if r.size_bytes == largest]
    unchecked = tuple(op for op in ops if all(r.op != op for r in checked))
    below = tuple(r for r in checked if r.busbw_gbps < floor_gbps)
    return FloorCheck(floor_gbps, tuple(checked), below, unchecked)


def floor_row_text(row: ResultRow) -> str:
    return f"{row.op} {format_size(row.size_bytes)} {row.placement}: {row.busbw_gbps:.2f} GB/s"
