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


def _module_marks(path: Path) -> str:
    """The source of a module's `pytestmark = ...` assignment ('' when it has none)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            return ast.get_source_segment(path.read_text(), node)
    return ""


SHAPING = ("shape_host", "shape_pair", "limit_nics", "link_history")


def _unmarked_shaping_tests(path: Path) -> list[str]:
    """Tests of a module that shape a link without running alone (the module's mark or their own)."""
    source = path.read_text()
    if not any(name in source for name in SHAPING) or "pytest.mark.alone" in _module_marks(path):
        return [path.name] if any(name in source for name in SHAPING) and "def test_" not in source else []
    loose = []
    for node in ast.parse(source, filename=str(path)).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            text = ast.get_source_segment(source, node)
            marks = [ast.get_source_segment(source, d) for d in node.decorator_list]
            if any(name in text for name in SHAPING) and "pytest.mark.alone" not in marks:
                loose.append(f"{path.name}::{node.name}")
    return loose


def test_a_test_that_measures_through_shaped_links_runs_alone():
    """Bandwidth through a tc-shaped link moves with the CPU load beside it: such a test runs in the
    suite's second pass, by itself (scripts/dev.sh test)."""
    modules = sorted((TESTS / "integration").glob("test_*.py"))
    assert any(any(name in path.read_text() for name in SHAPING) for path in modules), "the rule checks nothing"
    assert [test for path in modules for test in _unmarked_shaping_tests(path)] == [], "mark these alone"


def test_every_group_a_module_names_is_one_the_conftest_knows():
    from tests.conftest import FIXTURE_GROUPS

    known = {"timing", *FIXTURE_GROUPS.values()}
    named = {name for path in _test_sources() for name in
             __import__("re").findall(r'xdist_group\("([^"]+)"\)', _module_marks(path))}
    assert named and named <= known, named - known
