"""The import direction of docs/architecture.md, checked on the source: a layer imports only
itself and the layers below it, and the pure layer never imports torch."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "nccl_bench"

# Every module of the package, placed explicitly in its layer: {layer: (level, modules)}, 'nccl_bench.'
# stripped. A lower level is a lower layer; a module may import modules of its own level or lower ones.
# A layer is a folder (or a top-level module) and holds only that folder's modules. A new module is
# added to its folder's tuple here and to the map of docs/architecture.md; test_every_module_is_placed
# fails until it is.
LAYERS: dict[str, tuple[int, tuple[str, ...]]] = {
    "errors": (0, ("errors",)),
    "units": (0, ("units", "units.alltoallv", "units.arrivals", "units.bandwidth", "units.clock", "units.hostlist",
                  "units.nccl_env", "units.op_table", "units.passwords", "units.rank_positions", "units.sizes",
                  "units.split_spec", "units.stats")),
    "results": (1, ("results", "results.csv_appender", "results.csv_reader", "results.dataframe",
                    "results.input_lines", "results.loader", "results.nccl_diag", "results.nccl_tuning",
                    "results.nccltests_json", "results.nccltests_log", "results.nccltests_names",
                    "results.nccltests_rows", "results.rank_times", "results.run_folder", "results.schema",
                    "results.whole_file")),
    "hardware": (1, ("hardware", "hardware.detect", "hardware.expected", "hardware.hidden_gpus", "hardware.host",
                     "hardware.host_config", "hardware.known_gpus", "hardware.nvidia_smi", "hardware.nvls",
                     "hardware.nvml", "hardware.stack")),
    # what an option declaration is, and the parsers with their bounds (pure)
    "option_types": (1, ("option_types",)),
    # the verdict engine (pure, rows in): read by the sweep's baseline check and the renderers
    "comparison": (2, ("comparison",)),
    # every command's options, declared once: read by the configs and the CLI
    "options": (3, ("options",)),
    "ranks": (4, ("ranks", "ranks.check", "ranks.clocks", "ranks.collectives", "ranks.deadline", "ranks.devices",
                  "ranks.dist", "ranks.faults", "ranks.flight_recorder", "ranks.graph_capture", "ranks.launch",
                  "ranks.layout", "ranks.native_output", "ranks.nccl_trace", "ranks.planted", "ranks.positions",
                  "ranks.preflight", "ranks.roll_call", "ranks.run_facts", "ranks.run_owner", "ranks.runner",
                  "ranks.session", "ranks.set_up", "ranks.split", "ranks.star_gather")),
    # the commands on ranks, each with its config, plan, body and report, placed alike
    "doctor": (5, ("doctor", "doctor.config_check", "doctor.config_facts",
                   "doctor.doctor_body", "doctor.doctor_config", "doctor.doctor_entry",
                   "doctor.doctor_report", "doctor.repeat_noise", "doctor.roster", "doctor.schedule",
                   "doctor.verdicts")),
    "sweep": (5, ("sweep", "sweep.baseline_check", "sweep.busbw_floor", "sweep.plan", "sweep.references",
                  "sweep.rows", "sweep.saved_baselines", "sweep.sweep_body", "sweep.sweep_config", "sweep.sweep_entry",
                  "sweep.sweep_report", "sweep.variants")),
    "replay": (5, ("replay", "replay.profile", "replay.replay_body", "replay.replay_config", "replay.replay_entry",
                   "replay.overlap", "replay.exposure", "replay.replay_plan", "replay.trace_events",
                   "replay.kernel_matching", "replay.trace_reader", "replay.trace_values", "replay.trace_vocabulary")),
    # the history, its series, hosts and the regression rule: reads run folders, above the commands
    "history": (6, ("history", "history.address", "history.changes", "history.hosts", "history.records",
                    "history.recording", "history.rule", "history.series", "history.store", "history.store_connect",
                    "history.store_guard",
                    "history.stored_values",
                    "history.store_schema")),
    # rows, comparisons, the doctor's verdicts and the store's answers as text, pages and figures
    "render": (7, ("render", "render.compare_exports", "render.doctor_text", "render.escape", "render.fit",
                   "render.formats", "render.history_page", "render.history_text", "render.html", "render.labels",
                   "render.limits_text", "render.live", "render.nccltests_text", "render.plots", "render.prom",
                   "render.rank_heatmap", "render.repeats", "render.replay_text", "render.tables", "render.unjudged")),
    # the shell: one module per command, local workers, messages, the typer shim
    "cli": (8, ("cli", "cli.compare", "cli.doctor", "cli.entry", "cli.history", "cli.limits", "cli.local_workers",
                "cli.messages", "cli.on_ranks", "cli.option_sets", "cli.ops", "cli.params", "cli.replay", "cli.report",
                "cli.streams", "cli.sweep", "cli.typer_shim", "cli.verdict_files")),
    "__main__": (8, ("__main__",)),
}
HEAVY = ("torch", "pandas", "matplotlib")
PLACED = {module: (layer, level) for layer, (level, modules) in LAYERS.items() for module in modules}
UNPLACED = "belongs to no layer: add it to its folder's modules in LAYERS (tests/unit/test_architecture.py)"


def _layer_of(module: str) -> tuple[str, int]:
    """The layer that lists this module ('nccl_bench.' stripped)."""
    if module not in PLACED:
        raise AssertionError(f"nccl_bench.{module} {UNPLACED} and to docs/architecture.md's map")
    return PLACED[module]


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


def test_every_module_is_placed():
    """No module inherits a layer from its folder: each is listed, and each listed module exists."""
    found = {module for module, _ in _modules()}
    assert [f"nccl_bench.{m} {UNPLACED}" for m in sorted(found - set(PLACED))] == []
    assert sorted(set(PLACED) - found) == [], "listed in LAYERS but not in the package"


def test_each_module_is_placed_once_in_its_own_folders_layer():
    listed = [module for _, modules in LAYERS.values() for module in modules]
    assert len(listed) == len(set(listed))
    for layer, (_, modules) in LAYERS.items():
        assert all(m == layer or m.startswith(f"{layer}.") for m in modules), layer


def test_placement_is_explicit():
    with pytest.raises(AssertionError, match=r"nccl_bench\.render\.new_view belongs to no layer"):
        _layer_of("render.new_view")


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


def _set_outside_init(cls: ast.ClassDef) -> set[str]:
    """Attributes of self first assigned in a method other than __init__."""
    assigned: dict[str, set[str]] = {}
    for method in (node for node in cls.body if isinstance(node, ast.FunctionDef)):
        for node in ast.walk(method):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
            for part in (p for target in targets for p in ast.walk(target)):
                if isinstance(part, ast.Attribute) and getattr(part.value, "id", None) == "self":
                    assigned.setdefault(method.name, set()).add(part.attr)
    return set().union(*assigned.values()) - assigned.get("__init__", set())


@pytest.mark.parametrize("module,name", [("sweep/sweep_body.py", "_Sweep"), ("doctor/doctor_body.py", "_Doctor"),
                                         ("ranks/session.py", "Run")])
def test_a_run_body_declares_its_state_in_init(module, name):
    """Every attribute a body or the run holds is declared in __init__, so one reading says what it carries."""
    tree = ast.parse((PACKAGE / module).read_text())
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    assert _set_outside_init(cls) == set()


def test_no_module_writes_another_objects_private_fields():
    """An object's private fields are its own: another module asks it through a method or a public field.
    The typer shim alone sets one on click's parameter objects, which is what it is for."""
    writes = set()
    for module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and getattr(node.value, "id", None) not in ("self", "cls")):
                writes.add(module)
    assert writes == {"cli.typer_shim"}


# The rank side: what runs on ranks or below the command line (ranks/, each command's package, the history).
RANK_SIDE = ("ranks", "sweep", "doctor", "replay", "history")
# Where a command that runs on ranks declares its options: its config's fields carry them (the flags too).
CONFIG_DECLARATIONS = ("sweep.sweep_config", "doctor.doctor_config", "replay.replay_config")
COMMAND_LINE = ("nccl_bench.options", "nccl_bench.option_types", "nccl_bench.cli")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _rank_side() -> list[tuple[str, Path]]:
    return [(module, path) for module, path in _modules()
            if module.split(".")[0] in RANK_SIDE and module not in CONFIG_DECLARATIONS]


@pytest.mark.parametrize("module,path", _rank_side(), ids=[m for m, _ in _rank_side()])
def test_rank_side_code_does_not_import_the_command_line(module, path):
    """Rank-side code knows an option by its key (a config field) and reads its value from the config; the
    declarations (flags, parsers, help) are the command line's and the config modules' alone."""
    imported = [name for name, _ in _imports(path) if name.startswith(COMMAND_LINE)]
    assert imported == [], f"{module} imports {imported}"


def test_no_option_declaration_is_imported_below_the_command_line():
    """The declarations in options.py are read by cli/ and the config modules whose fields carry them;
    the rest (rank side, results, render) names options by key and is given flags by cli/ where a message
    must spell one."""
    importers = {module for module, path in _modules() for name, _ in _imports(path)
                 if name.startswith("nccl_bench.options")}
    assert importers - set(CONFIG_DECLARATIONS) <= {m for m in importers if m.startswith("cli")}, importers


def _raised_errors(path: Path) -> list[tuple[int, ast.AST]]:
    return [(node.lineno, node.exc) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Raise) and node.exc is not None]


@pytest.mark.parametrize("module,path", _rank_side(), ids=[m for m, _ in _rank_side()])
def test_rank_side_errors_name_options_by_key(module, path):
    """No input error raised on the rank side spells a flag or asks a config module for one: it names its
    option by key (errors.OptionError, other options it mentions as {key}), and cli/ writes the flags.
    (A run that failed, a RunFailedError, says what happened in the run's own words: `--timeout N s`.)"""
    for line, exc in _raised_errors(path):
        if isinstance(exc, ast.Call) and getattr(exc.func, "id", None) in ("UserInputError", "OptionError"):
            spelled = [found for node in ast.walk(exc) if isinstance(node, ast.Constant)
                       and isinstance(node.value, str) for found in FLAG.findall(node.value)]
            assert spelled == [], f"{module}:{line} raises an error that spells {spelled}"
            named_by = [node.func for node in ast.walk(exc) if isinstance(node, ast.Call)
                        and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("option_name", "option_usage")]
            assert named_by == [], f"{module}:{line} names an option by its flag in an input error"


def test_the_rank_side_rule_sees_a_flag_in_an_error(tmp_path):
    spelling = tmp_path / "spelling.py"
    spelling.write_text('def f():\n    raise OptionError("workers", "use --workers 2")\n')
    with pytest.raises(AssertionError, match="spells"):
        test_rank_side_errors_name_options_by_key("ranks.spelling", spelling)
