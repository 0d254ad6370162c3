"""Each host's record in the doctor's runs, read from the store: runs taken part in, times flagged,
of which kind, and when last. What the store answers; render/history_text.py and
render/history_page.py show it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostSummary:
    host: str
    runs: int
    flagged: int
    kinds: dict[str, int]
    last_flagged_utc: str | None


def host_records(store) -> list[HostSummary]:
    """Every host of the doctor's runs: a handful of rows per host, however many runs."""
    kinds: dict[str, dict[str, int]] = {}
    for host, kind, times in store.host_kinds():
        kinds.setdefault(host, {})[kind] = int(times)
    return [HostSummary(host, int(runs), int(flagged or 0), kinds.get(host, {}), last)
            for host, runs, flagged, last in store.host_records()]
