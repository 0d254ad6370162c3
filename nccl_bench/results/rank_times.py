"""ranks.csv read back for pictures: each point's time in the op, arrival offset and gap per rank, the
median over its trials and cycles (docs/results.md, `ranks.csv`). Stdlib only.

Only a sweep's run folder has a ranks.csv (older runs and nccl-tests logs have none): a run without one
reads as no points, and a line that does not hold the columns' types is skipped with one warning.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from nccl_bench.results.input_lines import ResultsWarning, bounded_lines, open_text
from nccl_bench.results.run_folder import RESULTS_CSV
from nccl_bench.results.schema import RANKS_CSV, RANKS_SCHEMA_VERSION
from nccl_bench.units import stats


@dataclass(frozen=True)
class RankPoint:
    """One point of a run (op, placement, group, variant, size) and its ranks' figures, in rank order."""

    op: str
    placement: str
    group: str
    variant: str
    size_bytes: int
    ranks: tuple[int, ...]
    time_in_op_us: tuple[float, ...]  # each rank's median over the point's trials and cycles
    arrival_us: tuple[float, ...]
    gap_us: tuple[float, ...] | None = None  # time outside the op before each call; None: not every rank has one

    @property
    def panel(self) -> tuple[str, str, str, str]:
        return self.op, self.placement, self.group, self.variant


def ranks_file(path: Path) -> Path | None:
    """ranks.csv of a run folder, or of the folder a results.csv sits in; None for any other input."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent if path.name == RESULTS_CSV else None
    found = None if folder is None else folder / RANKS_CSV
    return found if found is not None and found.is_file() else None


def read_rank_points(path: Path, option: str = "RUN") -> list[RankPoint]:
    """The points of the run at path that have ranks.csv lines, in the order the file first names them;
    [] where there is no ranks.csv."""
    found = ranks_file(path)
    if found is None:
        return []
    figures: dict[tuple, dict[int, tuple[list[float], list[float], list[float | None]]]] = defaultdict(dict)
    skipped = 0
    with open_text(found, newline="", encoding="utf-8", errors="replace") as handle:
        for line in csv.DictReader(bounded_lines(handle, found, option)):
            parsed = _parsed(line)
            if parsed is None:
                skipped += 1
                continue
            point, rank, in_op, arrival, gap = parsed
            times, arrivals, gaps = figures[point].setdefault(rank, ([], [], []))
            times.append(in_op)
            arrivals.append(arrival)
            gaps.append(gap)
    if skipped:
        warnings.warn(ResultsWarning(f"{found}: {skipped} line(s) without a rank's figures were skipped"),
                      stacklevel=2)
    return [_point(point, per_rank) for point, per_rank in figures.items()]


def _parsed(line: dict) -> tuple[tuple, int, float, float, float | None] | None:
    """A line's point, rank and figures; its gap None where the cell is empty (a GPU's sweep keeps none)
    or not a time."""
    try:
        if int(line["schema_version"]) != RANKS_SCHEMA_VERSION or None in line.values():
            return None
        point = (line["op"], line["placement"], line["group"], line["variant"], int(line["size_bytes"]))
        rank, in_op, arrival = int(line["rank"]), float(line["time_in_op_us"]), float(line["arrival_us"])
    except (KeyError, TypeError, ValueError):
        return None
    if rank < 0 or not all(math.isfinite(v) and v >= 0 for v in (in_op, arrival)):
        return None
    try:
        gap = float(line.get("gap_us") or "nan")
    except ValueError:
        gap = math.nan
    return point, rank, in_op, arrival, gap if math.isfinite(gap) and gap >= 0 else None


def _point(point: tuple, per_rank: dict[int, tuple[list[float], list[float], list[float | None]]]) -> RankPoint:
    ranks = tuple(sorted(per_rank))
    gaps = [per_rank[r][2] for r in ranks]
    every_gap = all(g is not None for found in gaps for g in found)
    return RankPoint(*point, ranks=ranks,
                     time_in_op_us=tuple(stats.median(per_rank[r][0]) for r in ranks),
                     arrival_us=tuple(stats.median(per_rank[r][1]) for r in ranks),
                     gap_us=tuple(stats.median(found) for found in gaps) if every_gap else None)

