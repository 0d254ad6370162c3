"""Pure: which --nccl-env variant was fastest at each point, and by how much (the tuning answer).

Rows of one run folder, every variant's; a point is (op, placement, size, group). Variants are judged
on busbw where the op has one, else on the time per op; a point with fewer than two measured variants
has no answer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from nccl_bench.results.schema import STATUS_OK, ResultRow


@dataclass(frozen=True)
class Fastest:
    """The fastest variant of one point, and the runner-up it beat."""

    op: str
    placement: str
    size_bytes: int
    group: str
    best: ResultRow
    runner_up: ResultRow

    @property
    def on_busbw(self) -> bool:
        """Ranked by busbw where both have one above 0 (at one rank an (n-1)/n op's is 0 by definition)."""
        return bool(self.best.busbw_gbps) and bool(self.runner_up.busbw_gbps)

    @property
    def margin(self) -> float:
        """How much faster the best is than the runner-up, as a fraction (0.25: 25% faster)."""
        if self.on_busbw:
            return self.best.busbw_gbps / self.runner_up.busbw_gbps - 1 if self.runner_up.busbw_gbps else 0.0
        return self.runner_up.time_us / self.best.time_us - 1 if self.best.time_us else 0.0


def _speed(row: ResultRow) -> float:
    """Larger is faster: busbw, else (none, or 0 by definition at one rank) the inverse of the time per op."""
    if row.busbw_gbps:
        return row.busbw_gbps
    return 1.0 / row.time_us if row.time_us else 0.0


def fastest_variants(rows: Iterable[ResultRow]) -> list[Fastest]:
    """Per point with at least two measured variants, the fastest and the runner-up, in the order of the rows.

    A point measured in several cycles counts each variant's best cycle."""
    by_point: dict[tuple[str, str, int, str], dict[str, ResultRow]] = defaultdict(dict)
    for row in rows:
        if not row.variant or row.status != STATUS_OK or row.time_us is None:
            continue
        best = by_point[(row.op, row.placement, row.size_bytes, row.group)]
        if row.variant not in best or _speed(row) > _speed(best[row.variant]):
            best[row.variant] = row
    found = []
    for (op, placement, size, group), per_variant in by_point.items():
        if len(per_variant) < 2:
            continue
        first, second = sorted(per_variant.values(), key=_speed, reverse=True)[:2]
        found.append(Fastest(op, placement, size, group, first, second))
    return found
