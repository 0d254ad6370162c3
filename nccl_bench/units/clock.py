"""The time now as the tool writes it: one place for the clock's text form."""

from __future__ import annotations

import datetime


def utc_now_iso() -> str:
    """Now in UTC, ISO 8601 with its offset ('2024-05-01T12:00:00.123456+00:00')."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat()
