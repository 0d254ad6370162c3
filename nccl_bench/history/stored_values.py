"""What the history stores and how its text comes back: a run's values within the bounds of a
measurement (finite, non-negative, below MAX_*), refused whole otherwise; its text escaped as readers
give it back (every control character shown as \\x.., never raw), so a series is found by the key a
reader read."""

from __future__ import annotations

import math
import re
from typing import Any, Iterator

from nccl_bench.errors import UserInputError
from nccl_bench.history.records import RunRecord

# Bounds of a value the store keeps: 1 PB/s is far above any link (NVLink 5: 1.8 TB/s per GPU, NVIDIA's
# GB200 NVL72 datasheet), and a collective of 10^12 us (11 days) is no measurement.
MAX_BUSBW_GBPS = 1e6
MAX_TIME_US = 1e12
MAX_NOISE = 100.0  # a run's log-space spread (records.within_run_noise): e^100 between its trials is no measurement
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def refuse_bad_values(run: RunRecord) -> None:
    """A run whose value is not a finite, non-negative busbw (at most MAX_BUSBW_GBPS) and time is never stored."""
    for value in run.values:
        for what, number, bound in (("busbw_gbps", value.busbw_gbps, MAX_BUSBW_GBPS),
                                    ("time_us", value.time_us, MAX_TIME_US), ("noise", value.noise, MAX_NOISE)):
            if number is None and what != "busbw_gbps":
                continue
            if not isinstance(number, (int, float)) or not math.isfinite(number) or not 0 <= number <= bound:
                point = " ".join(clean_text(str(part)) for part in value.key[:4])  # op, placement, size, dtype
                raise UserInputError(run.source, f"{what} {number!r} of {point} is not a measurement (a finite "
                                     f"number from 0 to {bound:g}); the run is not stored")
    for host in run.row_hosts:
        for number in host.late_us:
            if number is not None and not (isinstance(number, (int, float)) and math.isfinite(number)
                                           and 0 <= number <= MAX_TIME_US):
                raise UserInputError(run.source, f"late_us {number!r} of host {clean_text(host.host)} is not a "
                                     f"measurement (a finite number from 0 to {MAX_TIME_US:g}); the run is not stored")


def clean_text(value: Any) -> Any:
    """Text from the store with every control character shown as an escape (\\x1b), never raw."""
    if not isinstance(value, str):
        return value
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", value)


def stored_form(run: RunRecord) -> RunRecord:
    """The run with its text escaped as the readers give it back (clean_text): a series is looked up by the
    key a reader read, so a key stored raw (a host name holding ESC) would be counted and never found."""
    from dataclasses import replace

    values = tuple(replace(value, key=tuple(clean_text(part) for part in value.key)) for value in run.values)
    hosts = tuple(replace(host, host=clean_text(host.host), kinds=tuple(clean_text(kind) for kind in host.kinds))
                  for host in run.hosts)
    row_hosts = tuple(replace(host, host=clean_text(host.host)) for host in run.row_hosts)
    return replace(run, system=clean_text(run.system), backend=clean_text(run.backend), source=clean_text(run.source),
                   values=values, hosts=hosts, row_hosts=row_hosts)


def clean_rows(rows: Iterator[tuple]) -> Iterator[tuple]:
    for row in rows:
        yield tuple(clean_text(value) for value in row)
