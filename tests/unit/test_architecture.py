"""The import direction of docs/architecture.md, checked on the source: a layer imports only
itself and the layers below it, and the pure layer never imports torch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "nccl_bench"

# Lower number = lower layer. A module may import modules of its own layer or lower ones.
LAYERS = {
    "errors": 0,
    "units": 0,
    "results": 1,
    "hardware": 1,
    "option_types": 1,  # what an option declaration is, and the parsers with their bounds (pure)
    "comparison": 2,  # the verdict engine (pure, rows in): read by the sweep's baseline check and the renderers
    "options": 3,  # every command's options, declared once: read by both configs and the CLI
    "sweep.sweep_config": 3,  # the sweep's config: options only, read by the rank side
    "doctor.doctor_config": 3,  # the doctor's config: options only, beside the sweep's
    "ranks": 4,
    "doctor": 5,
    "sweep": 5,  # the sweep's plan, body and report, placed as the doctor's
    "replay": 5,  # a job's collectives read from its profiler traces, placed as sweep/ and doctor/
    "history": 6,  # the results store, series and the regression rule: reads run folders, above the commands
    "history.views": 7,  # the store's answers as text and the dashboard page: they use render's tables and escaping
    "history.page": 7,
    "render": 7,
    "cli": 8,  # the package: one module per command, local workers, messages, the typer shim
    "__main__": 8,
}
HEAVY = ("torch", "pandas", "matplotlib")


def _layer_of(module: str) -> tuple[str, int]:
    """The most specific LAYERS key that names this module ('nccl_bench.' stripped)."""
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        key = ".".join(parts[:length])
        if key in LAYERS:
            return key, LAYERS[key]
    raise AssertionError(f"nccl_bench.{module} belongs to no layer: add it to LAYERS and docs/architecture.md")


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).with_suffix("")
        parts = [p for p in relative.parts if p != "__init__"]
        if parts:
            out.append((".".join(parts), path))
    return out


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module top level) for every import in the file."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "nccl_bench":
                found += [(f"nccl_bench.{alias.name}", id(node) in top) for alias in node.names]
            else:
                found.append((node.module, id(node) in top))
    return found


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_imports_point_down(module, path):
    key, level = _layer_of(module)
    for imported, _ in _imports(path):
        if not imported.startswith("nccl_bench."):
            continue
        other_key, other_level = _layer_of(imported[len("nccl_bench."):])
        assert other_level <= level, f"{module} ({key}) imports {imported} ({other_key}), a higher layer"


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_heavy_libraries_only_where_needed(module, path):
    key, level = _layer_of(module)
    for imported, at_top in _imports(path):
        root = imported.split(".")[0]
        if root not in HEAVY:
            continue
        assert level > 0, f"{module} is pure ({key}) but imports {imported}"
        assert not at_top, (
            f"{module} imports {imported} at module level: --help and argument errors must not pay for it"
        )


def test_rank_code_never_imports_render_or_cli():
    for module, path in _modules():
        if module.startswith("ranks."):
            for imported, _ in _imports(path):
                assert not imported.startswith(("nccl_bench.render", "nccl_bench.cli")), f"{module} imports {imported}"


def _calls(path: Path) -> set[str]:
    """Names of every function or method called in the file (the last part of a dotted name)."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


@pytest.mark.parametrize("made", ["process_group", "write_meta", "init_process_group", "claim_run_dir"])
def test_the_run_life_cycle_exists_once(made):
    """A process group, a run folder and meta.json are made only by ranks/session.py (the CLI's launcher-less
    path makes the folder before any worker starts), so every command on ranks shares one life cycle."""
    allowed = {"process_group": {"ranks.session"}, "write_meta": {"ranks.session"},
               "init_process_group": {"ranks.dist"}, "claim_run_dir": {"ranks.session", "cli.local_workers"}}
    callers = {module for module, path in _modules() if made in _calls(path)}
    assert callers == allowed[made]


def test_every_command_on_ranks_runs_through_the_session():
    for module in ("sweep/sweep_body.py", "doctor/doctor_body.py"):
        tree = ast.parse((PACKAGE / module).read_text())
        assert any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "execute"
                   and getattr(node.func.value, "id", None) == "session" for node in ast.walk(tree)), module
