"""The parallel pass's groups hold on the pytest and pytest-xdist installed here: a module's shared fixture is made
once and its tests run on one worker, and a declared group runs on one worker (tests/helpers/groups.py).

A real `pytest -n 3 --dist loadgroup` on a throwaway suite that uses the suite's own grouping hook: where
pytest-xdist loses the groups (it did with pytest 9.2, whose node ids drop xdist's `@group` suffix), the
timing tests meet on the cores and every worker starts its own Slurm, Open MPI and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.launch import REPO

CONFTEST = """
import pytest

from tests.helpers.groups import mark_groups


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_groups(items)
"""

TESTS = """
import os
from pathlib import Path

import pytest

OUT = Path(os.environ["GROUPS_OUT"])


def _note(line):
    with (OUT / "lines").open("a") as handle:
        handle.write(line + "\\n")


@pytest.fixture(scope="module")
def made_once():
    _note("made")


@pytest.mark.parametrize("n", range(6))
def test_shared(made_once, n):
    _note(f"shared {os.environ['PYTEST_XDIST_WORKER']}")


@pytest.mark.xdist_group("timing")
@pytest.mark.parametrize("n", range(4))
def test_timed(n):
    _note(f"timing {os.environ['PYTEST_XDIST_WORKER']}")


@pytest.mark.parametrize("n", range(6))
def test_free(n):
    _note(f"free {os.environ['PYTEST_XDIST_WORKER']}")
"""


def test_a_modules_fixture_is_made_once_and_each_group_runs_on_one_worker(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_grouped.py").write_text(TESTS)
    env = dict(os.environ, GROUPS_OUT=str(tmp_path), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", "--rootdir", str(suite), str(suite)],
                          capture_output=True, text=True, env=env, cwd=suite, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    lines = Path(tmp_path / "lines").read_text().splitlines()
    workers = {kind: {line.split()[1] for line in lines if line.startswith(kind + " ")}
               for kind in ("shared", "timing", "free")}
    assert lines.count("made") == 1
    assert len(workers["shared"]) == 1 and len(workers["timing"]) == 1
    assert sum(line.startswith("free ") for line in lines) == 6


def test_groups_start_first_then_integration_then_command_line_then_unit_tests():
    from types import SimpleNamespace

    from tests.helpers.groups import long_first

    def item(nodeid: str, group: str | None = None):
        marker = SimpleNamespace(args=(group,)) if group else None
        return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name, marker=marker: marker)

    items = [item("tests/unit/test_a.py::t"), item("tests/cli/test_b.py::t"), item("tests/integration/test_c.py::t1"),
             item("tests/unit/test_d.py::t", "timing"), item("tests/integration/test_c.py::t2"),
             item("tests/cli/test_e.py::t", "postgresql")]
    assert [i.nodeid for i in long_first(items)] == [
        "tests/unit/test_d.py::t", "tests/cli/test_e.py::t", "tests/integration/test_c.py::t1",
        "tests/integration/test_c.py::t2", "tests/cli/test_b.py::t", "tests/unit/test_a.py::t"]


ALONE_CONFTEST = """
from tests.helpers.groups import skipped_by_alone_pass


def pytest_ignore_collect(collection_path, config):
    return skipped_by_alone_pass(collection_path, config.getoption("markexpr"))
"""


def test_the_alone_pass_imports_only_the_modules_that_mark_a_test_alone(tmp_path):
    """`-m alone` collects the marked tests without importing the rest (a module that cannot be imported
    shows it); every other run, `-m "not alone"` included, imports and runs everything."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(ALONE_CONFTEST)
    (suite / "test_marked.py").write_text("import pytest\n\n\n@pytest.mark.alone\ndef test_a():\n    pass\n\n\n"
                                          "def test_b():\n    pass\n")
    (suite / "test_unmarked.py").write_text("raise ImportError('imported')\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                               "-W", "ignore::pytest.PytestUnknownMarkWarning", "--rootdir", str(suite), *args,
                               str(suite)], capture_output=True, text=True, env=env, cwd=suite, timeout=120)

    alone = run("-m", "alone")
    assert alone.returncode == 0 and "1 passed, 1 deselected" in alone.stdout, alone.stdout[-2000:]
    rest = run("-m", "not alone")
    assert rest.returncode != 0 and "imported" in rest.stdout, rest.stdout[-2000:]
