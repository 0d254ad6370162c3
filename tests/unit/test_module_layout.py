"""The package's modules are small and named apart: no module over MAX_LINES lines, and no two
modules share a file name, so a name in a traceback, an import or a search says which one it is.

The packages sweep/ and doctor/ share their names with the command modules cli/sweep.py and
cli/doctor.py on purpose: a command's shell and the command's body on ranks.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "nccl_bench"
# Past this a module holds more than one job: split it by job before adding to it.
MAX_LINES = 450


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")


def test_no_module_is_longer_than_the_limit():
    long = {str(path.relative_to(PACKAGE)): count for path in _modules()
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these by job (at most {MAX_LINES} lines each)"


def test_no_two_modules_share_a_file_name():
    where = defaultdict(list)
    for path in _modules():
        where[path.name].append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert shared == {}, "give each module a name that says what it holds"
