"""The wall clock as every record states it: UTC, ISO 8601 with its offset, so runs taken on hosts
in different time zones sort and compare as written."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now_iso() -> str:
    """Now, in UTC, as ISO 8601 ('2025-01-31T12:00:00.123456+00:00')."""
    return datetime.now(timezone.utc).isoformat()
