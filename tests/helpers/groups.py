"""The pytest-xdist group a test's fixtures put it in (tests/conftest.py says why groups exist)."""

from __future__ import annotations

import pytest

FIXTURE_GROUPS = {"postgres_server": "postgresql", "slurm": "slurm", "mpi": "mpi", "shared_sweep": "shared-sweep"}


def fixture_group(item: pytest.Item) -> str | None:
    """The group a test's fixtures put it in, or None; `store_url` needs the server only as postgresql."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("store_url") == "postgresql":
        return FIXTURE_GROUPS["postgres_server"]
    return next((group for name, group in FIXTURE_GROUPS.items() if name in item.fixturenames), None)
