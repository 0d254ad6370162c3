"""Each host's record in the history, read from the store: from the doctor's runs, the runs taken part
in, times flagged, of which kind, and when last; from the runs' rows, how many it took part in, how many
of them named it the late host, and by how much it was late (the median). What the store answers;
render/history_text.py and render/history_page.py show it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from nccl_bench.units.stats import median


@dataclass(frozen=True)
class HostSummary:
    host: str
    runs: int  # doctor runs
    flagged: int
    kinds: dict[str, int]
    last_flagged_utc: str | None
    rows: int = 0  # result rows of runs with meta.json's hosts that it took part in
    late_rows: int = 0  # of those, the rows that named it late
    late_median_us: float | None = None  # median lateness over its late rows that said by how much


def host_records(store) -> list[HostSummary]:
    """Every host of the doctor's runs and of the runs' rows: a handful of rows per host, however many runs,
    and the lateness of each row that named it late (a median has no SQL both databases share)."""
    kinds: dict[str, dict[str, int]] = {}
    for host, kind, times in store.host_kinds():
        kinds.setdefault(host, {})[kind] = int(times)
    found = {host: HostSummary(host, int(runs), int(flagged or 0), kinds.get(host, {}), last)
             for host, runs, flagged, last in store.host_records()}
    lateness: dict[str, list[float]] = {}
    for host, late_us in store.late_values():
        lateness.setdefault(host, []).append(float(late_us))
    for host, rows, late in store.host_rows():
        values = lateness.get(host)
        found[host] = replace(found.get(host, HostSummary(host, 0, 0, {}, None)), rows=int(rows or 0),
                              late_rows=int(late or 0), late_median_us=median(values) if values else None)
    return [found[host] for host in sorted(found)]
