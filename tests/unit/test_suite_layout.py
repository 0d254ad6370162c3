"""Rules the test suite itself keeps, so that a test that passes alone also passes in the full run.

The tests have no ``__init__.py`` files, so pytest imports each test file and each conftest.py by
its bare name. Two consequences are checked here: two test files with one basename collide, and a
bare ``import conftest`` binds whichever conftest.py pytest imported first under that name (the
one in tests/unit/ranks/ in a full run, tests/conftest.py in a single file's run).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _test_sources() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_test_file_basenames_are_unique():
    counts = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in counts.items() if count > 1] == []


def test_shared_helpers_are_imported_by_their_package_path():
    bare = [
        str(path.relative_to(TESTS))
        for path in _test_sources()
        if "conftest" in _imported_modules(path)
    ]
    assert bare == [], "import tests.conftest, never the bare name conftest"
