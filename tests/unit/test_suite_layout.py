"""Rules the test suite itself keeps, so that a test that passes alone also passes in the full run.

The tests have no ``__init__.py`` files, so pytest imports each test file and each conftest.py by
its bare name. Two consequences are checked here: two test files with one basename collide, and a
bare ``import conftest`` binds whichever conftest.py pytest imported first under that name (the
one in tests/unit/ranks/ in a full run, tests/conftest.py in a single file's run).

What tests share lives in one package, tests/helpers/ (imported as ``tests.helpers.<module>``): a
conftest.py holds fixtures and hooks only, no module imports one, and a helper the package has is
never written again beside a test.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPERS = TESTS / "helpers"
# Helpers tests/helpers/ has (ports.free_port, rows.row, processes.alive/dead_pid/wait_for, launch.run_cli ...):
# a function of one of these names anywhere else is a copy of one.
SHARED_NAMES = {"_free_port", "_row", "_alive", "_dead_pid", "_wait_for", "run_cli", "run_torchrun", "worker_env",
                "child_pids", "rank_of", "layout_tag", "_parsed"}


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
CLUSTERS = ("slurm", "mpi")  # fixtures of simulated hosts under a real launcher
FABRIC_BOUND = "limit_nics"  # every NIC at tests/helpers/simhosts.FABRIC_RATE: the links decide


LOOSE_TOLERANCE = ("99%", "LOOSE")  # a pair named only below 1% of the fleet's median: no load comes near


def _judges_bandwidth(node: ast.FunctionDef, text: str) -> bool:
    """It shapes a link, or it runs the doctor (whose verdicts are bandwidth ratios) on simulated hosts
    with a tolerance that the load beside it could cross."""
    on_hosts = any(arg.arg in CLUSTERS for arg in node.args.args)
    doctor = '"doctor"' in text or "doctor.sbatch" in text
    flat = " ".join(text.split())  # an argument list wrapped over lines reads as one
    loose = any(f'"--tolerance", {value}' in flat or f'"--tolerance", "{value}"' in flat for value in LOOSE_TOLERANCE)
    return any(name in text for name in SHAPING) or (on_hosts and doctor and not loose)


def _fabric_bound_fixtures(tree: ast.Module, source: str) -> set[str]:
    """The module's fixtures that limit every NIC of the hosts they make."""
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any("fixture" in ast.get_source_segment(source, d) for d in node.decorator_list)
            and FABRIC_BOUND in ast.get_source_segment(source, node)}


def _loose_bandwidth_tests(path: Path) -> list[str]:
    """Tests of a module that judge bandwidth between simulated hosts with the CPUs deciding it: neither
    marked alone nor with every NIC limited (in the test, or by a fixture of the module it uses)."""
    source = path.read_text()
    if "pytest.mark.alone" in _module_marks(path):
        return []
    tree = ast.parse(source, filename=str(path))
    bound_fixtures = _fabric_bound_fixtures(tree, source)
    loose = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            text = ast.get_source_segment(source, node)
            marks = [ast.get_source_segment(source, d) for d in node.decorator_list]
            bound = FABRIC_BOUND in text or any(arg.arg in bound_fixtures for arg in node.args.args)
            if _judges_bandwidth(node, text) and not bound and "pytest.mark.alone" not in marks:
                loose.append(f"{path.name}::{node.name}")
    return loose


def test_a_test_that_judges_bandwidth_between_simulated_hosts_runs_alone_or_on_limited_links():
    """Bandwidth between simulated hosts is bound by the CPU where no link is shaped, and a shaped link's by
    its token bucket only while the CPU keeps up: the load beside such a test moves what it judges. So it
    either limits every NIC to FABRIC_RATE, well below what the CPUs give a pair under the suite's load, and
    runs beside the others, or it runs in the suite's second pass, by itself (scripts/dev.sh test)."""
    modules = sorted((TESTS / "integration").glob("test_*.py"))
    judged = [node.name for path in modules for node in ast.parse(path.read_text()).body
              if isinstance(node, ast.FunctionDef) and _judges_bandwidth(node, ast.get_source_segment(path.read_text(),
                                                                                                        node))]
    assert len(judged) >= 3, "the rule checks nothing"
    assert [test for path in modules for test in _loose_bandwidth_tests(path)] == [], \
        "limit every NIC (Hosts.limit_nics) or mark these alone"


def test_the_rule_on_judged_bandwidth_tells_limited_links_from_loose_ones(tmp_path):
    """A fixture that limits every NIC makes its tests fabric-bound; a shaped host without it is loose."""
    module = tmp_path / "test_shaped.py"
    module.write_text('''import pytest


@pytest.fixture
def limited():
    hosts = make()
    hosts.limit_nics("400mbit")
    yield hosts


@pytest.fixture
def bare():
    yield make()


def test_on_limited_links(limited):
    limited.shape_host(2, "40mbit")


def test_on_bare_links(bare):
    bare.shape_host(2, "40mbit")


def test_limiting_itself(bare):
    bare.limit_nics("400mbit")
    bare.shape_host(2, "40mbit")
''')
    assert _loose_bandwidth_tests(module) == ["test_shaped.py::test_on_bare_links"]


def test_every_group_a_module_names_is_one_the_conftest_knows():
    from tests.helpers.groups import FIXTURE_GROUPS

    known = {"timing", "signals", *FIXTURE_GROUPS.values()}
    named = {name for path in _test_sources() for name in
             __import__("re").findall(r'xdist_group\("([^"]+)"\)', path.read_text())}
    assert named and named <= known, named - known


def _trees() -> dict[str, ast.Module]:
    sources = [*_test_sources(), *sorted((TESTS.parent / "benchmarks").rglob("*.py"))]
    return {str(path.relative_to(TESTS.parent)): ast.parse(path.read_text(), filename=str(path)) for path in sources}


def test_no_module_imports_a_conftest():
    importers = [name for name, tree in _trees().items() for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1] == "conftest"
                 or isinstance(node, ast.Import) and any(a.name.split(".")[-1] == "conftest" for a in node.names)]
    assert importers == [], "import what a test shares from tests.helpers, never from a conftest.py"


def _is_fixture(node: ast.FunctionDef) -> bool:
    def name(expr: ast.expr) -> str:
        expr = expr.func if isinstance(expr, ast.Call) else expr
        return ast.unparse(expr)

    return any(name(decorator) in ("pytest.fixture", "fixture") for decorator in node.decorator_list)


def _public_names(tree: ast.Module) -> list[str]:
    """What a module defines for others: public functions, classes and assigned names."""
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("_")]


def test_a_conftest_holds_only_fixtures_and_hooks():
    for path in TESTS.rglob("conftest.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        fixtures = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and _is_fixture(node)}
        helpers = [name for name in _public_names(tree) if name not in fixtures and not name.startswith("pytest_")]
        assert helpers == [], f"{path.relative_to(TESTS)}: move {helpers} to tests/helpers/"


def test_shared_helpers_are_not_written_again_beside_the_tests():
    copies = [f"{name}: {node.name}" for name, tree in _trees().items() if not name.startswith("tests/helpers/")
              for node in ast.walk(tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in SHARED_NAMES
              or isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda)
              and any(isinstance(t, ast.Name) and t.id in SHARED_NAMES for t in node.targets)]
    assert copies == [], "use tests/helpers/ (a partial of rows.row for a test's own kind of row)"


def test_helpers_live_in_the_helpers_package():
    loose = sorted(path.name for path in TESTS.glob("*.py") if path.name != "conftest.py")
    assert loose == [], "a module the tests share belongs in tests/helpers/"
    assert (HELPERS / "__init__.py").is_file()


def test_ports_come_from_the_free_port_helper():
    """A fixed port outside a private network namespace collides with a parallel test or another user
    of the machine; the kernel's pick (a bind to port 0, ports.free_port) never does."""
    binders = [name for name, tree in _trees().items() if not name.startswith("tests/helpers/")
               for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr == "getsockname"]
    assert binders == [], "use tests.helpers.ports.free_port"
