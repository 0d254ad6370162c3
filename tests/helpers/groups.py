"""The pytest-xdist group a test's fixtures put it in (tests/conftest.py says why groups exist).

A fixture wider than a test (module or session scope) is made once per worker that needs it: spread
over six workers, a module whose fixture runs two sweeps would run them up to six times. So every test
that uses such a fixture of the suite's own goes where the others that use it go: a module's fixture
keeps its module's tests on one worker, a session's fixture its users across modules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ALONE = "alone"  # the mark of the tests scripts/dev.sh runs in its second pass, by themselves

# Fixtures shared across modules, each with the group its users form; a daemon or a cluster started
# once for a worker's session is named for what it runs.
FIXTURE_GROUPS = {"postgres_server": "postgresql", "slurm": "slurm", "mpi": "mpi", "shared_sweep": "shared-sweep"}


def mark_groups(items: list[pytest.Item]) -> None:
    """Each test that its fixtures put in a group and that declares none is marked with that group (run
    before pytest-xdist reads the marks: tests/conftest.py's collection hook); then the tests are put in
    the order the workers should start them (long_first)."""
    for item in items:
        group = fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    items[:] = long_first(items)


def long_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Groups first, then the other integration tests, then the command-line tests, then the unit tests;
    within each, the order of collection. pytest-xdist hands out work in this order, and a group runs
    on one worker from start to end (the timing group is about four minutes): started last, a long group
    keeps one worker busy after the others have finished; started first, the many short tests fill
    the other workers around it. Sorting is stable, so every worker sees the same order."""
    def kind(item: pytest.Item) -> int:
        if item.get_closest_marker("xdist_group") is not None:
            return 0
        path = item.nodeid.split("::")[0]
        return 1 if "/integration/" in path else 2 if "/cli/" in path else 3

    return sorted(items, key=kind)


def fixture_group(item: pytest.Item) -> str | None:
    """The group a test's fixtures put it in, or None; `store_url` needs the server only as postgresql."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("store_url") == "postgresql":
        return FIXTURE_GROUPS["postgres_server"]
    named = next((group for name, group in FIXTURE_GROUPS.items() if name in item.fixturenames), None)
    return named or _wide_fixture_group(item)


def _wide_fixture_group(item: pytest.Item) -> str | None:
    """`module:<file>` or `session:<fixture>` for a test using a wider-than-test fixture written in tests/
    (pytest's and xdist's own, such as tmp_path_factory, cost nothing to make again), else None."""
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name) or ()
        if not definitions or not _ours(definitions[-1]) or name.startswith("_"):
            continue
        if definitions[-1].scope == "module":
            return f"module:{item.nodeid.split('::')[0]}"
        if definitions[-1].scope in ("session", "package"):
            return f"session:{name}"
    return None


def _ours(definition) -> bool:
    """A fixture written in this suite (a conftest.py or a test module), not one of pytest's or a plugin's."""
    module = definition.func.__module__
    return module.startswith(("tests.", "test_")) or module.split(".")[-1] == "conftest"


def skipped_by_alone_pass(path: Path, markexpr: str) -> bool | None:
    """True for a test module the `alone` pass (`-m alone` exactly) need not import: none of its tests
    is marked alone (a mark is written `pytest.mark.alone`, on a test or the module's pytestmark);
    None (pytest decides) for anything else and in every other run."""
    if markexpr != ALONE or path.suffix != ".py" or not path.name.startswith("test_"):
        return None
    return f"pytest.mark.{ALONE}" not in path.read_text() or None
