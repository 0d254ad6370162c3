"""What docs/architecture.md says of the code, checked on the source: every module on its map exists
and every module is on it; its import diagram is test_architecture's LAYERS; who prints, who writes
to stderr, who writes files, who ends the process, where pandas is imported.

The modules allowed to do each thing are named below, each with the reason it may. A module that
moves, or stops doing it, is one entry to change here and one sentence in docs/architecture.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.unit.test_architecture import LAYERS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nccl_bench"
DOC = ROOT / "docs" / "architecture.md"

# Modules that print (stdout or stderr): the CLI, and render/live.py for rank 0's live output.
PRINTS = ("cli.", "render.live")
# Modules that write lines to stderr themselves: the one printer of notes, warnings and errors.
STDERR = {"cli.messages"}
# Writes to the process's stdout/stderr file descriptors underneath Python's streams.
RAW_OUTPUT = {
    "ranks.native_output": "gives back what torch's and NCCL's C++ code wrote to stdout and stderr while the "
                           "rendezvous held them",
}
# Modules that open, create, replace or rename files, and why.
FILE_WRITERS = {
    "results.whole_file": "the whole-file writer (reports, exports, plots, meta.json, --prom, --exclude-file), "
                          "GitHub's step summary appended",
    "results.csv_appender": "results.csv and doctor.csv appended row by row",
    "results.run_folder": "the run folder made and claimed (its .claim file, made with O_EXCL)",
    "sweep.saved_baselines": "a baseline folder copied beside its name and renamed into place",
    "ranks.native_output": "an unnamed temporary file that holds stderr during the rendezvous",
    "cli.streams": "/dev/null opened in place of a closed stdout",
    "ranks.nccl_trace": "--nccl-trace: rank 0's NCCL log (NCCL writes it) moved into the run folder as the run ends",
}
# Figures are drawn into memory only here (plots.figure_bytes); the bytes go to results' writer.
SAVEFIG = {"render.plots"}
# The functions that import pandas (analysis only; never a command's path).
PANDAS_FUNCTIONS = {"rows_to_frame"}

_WRITE_MODE = re.compile(r"[wax+]")
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_APPEND", "O_CREAT", "O_TRUNC"}
_FILE_CALLS = {"os.replace", "os.rename", "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree",
               "shutil.move", "tempfile.TemporaryFile", "tempfile.NamedTemporaryFile", "tempfile.mkstemp",
               "tempfile.SpooledTemporaryFile"}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = [p for p in path.relative_to(PACKAGE).with_suffix("").parts if p != "__init__"]
        if parts:
            found[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return found


MODULES = _modules()


def _dotted(node: ast.AST) -> str:
    """'sys.stderr.write' for that attribute chain, 'print' for a bare name, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else f"?.{node.attr}"
    return ""


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _fd(call: ast.Call) -> int | None:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) else None


def _prints(call: ast.Call) -> bool:
    name = _dotted(call.func)
    last = name.rsplit(".", 1)[-1]
    return (name == "print" or (last in ("print", "echo") and "." in name)
            or name in ("sys.stdout.write", "sys.stderr.write") or (name == "os.write" and _fd(call) in (1, 2)))


def _to_stderr(call: ast.Call) -> bool:
    name = _dotted(call.func)
    last = name.rsplit(".", 1)[-1]
    target = _keyword(call, "file")
    return ((name == "print" and target is not None and _dotted(target) == "sys.stderr")
            or (last == "echo" and _is_true(_keyword(call, "err")))
            or name == "sys.stderr.write"
            or (last in ("Console", "make_console") and _is_true(_keyword(call, "stderr")))
            or (name == "os.write" and _fd(call) == 2))


def _writes_file(call: ast.Call) -> bool:
    name = _dotted(call.func)
    last = name.rsplit(".", 1)[-1]
    if name == "open":
        mode = call.args[1] if len(call.args) > 1 else _keyword(call, "mode")
        return mode is not None and not (isinstance(mode, ast.Constant) and not _WRITE_MODE.search(str(mode.value)))
    if name == "os.open":
        flags = call.args[1] if len(call.args) > 1 else _keyword(call, "flags")
        return any(isinstance(n, ast.Attribute) and n.attr in _WRITE_FLAGS for n in ast.walk(flags or ast.Pass()))
    return last in ("write_text", "write_bytes", "rename") or name in _FILE_CALLS


def _ends_process(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return _dotted(node.func) in ("sys.exit", "os._exit", "typer.Exit", "SystemExit")
    if isinstance(node, ast.Raise) and node.exc is not None:
        return _dotted(node.exc) in ("SystemExit", "typer.Exit")
    return False


def _who(predicate) -> set[str]:
    return {module for module, tree in MODULES.items()
            if any(isinstance(node, ast.Call) and predicate(node) for node in ast.walk(tree))}


def test_only_the_cli_and_render_live_print():
    printers = _who(_prints)
    assert {m for m in printers if not m.startswith(PRINTS)} == set(RAW_OUTPUT)
    assert "render.live" in printers and "cli.messages" in printers


def test_every_stderr_line_goes_through_cli_messages():
    assert _who(_to_stderr) == STDERR | set(RAW_OUTPUT)


def test_who_writes_files():
    assert _who(_writes_file) == set(FILE_WRITERS)


def test_no_render_module_opens_a_file():
    assert {m for m in _who(_writes_file) if m.startswith("render.")} == set()
    assert _who(lambda call: _dotted(call.func).endswith(".savefig")) == SAVEFIG


def test_only_the_cli_ends_the_process():
    enders = {module for module, tree in MODULES.items() if any(_ends_process(node) for node in ast.walk(tree))}
    assert enders and all(module.startswith("cli.") for module in enders), enders


def test_pandas_is_imported_only_inside_the_frame_functions():
    importers = set()
    for tree in MODULES.values():
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(name.split(".")[0] == "pandas" for name in names):
                    importers.add(function.name)
    assert importers == PANDAS_FUNCTIONS


@pytest.mark.parametrize("sample,expected", [
    ("print(x)", (True, False, False)),
    ("print(x, file=sys.stderr)", (True, True, False)),
    ("typer.echo(x, err=True)", (True, True, False)),
    ("console.print(x)", (True, False, False)),
    ("sys.stdout.write(x)", (True, False, False)),
    ("os.write(2, raw)", (True, True, False)),
    ("open(p, 'a', encoding='utf-8')", (False, False, True)),
    ("open(p, encoding='utf-8')", (False, False, False)),
    ("open(p, 'rb')", (False, False, False)),
    ("os.open(p, os.O_WRONLY | os.O_APPEND)", (False, False, True)),
    ("os.open(p, os.O_RDONLY)", (False, False, False)),
    ("Path(p).write_text('')", (False, False, True)),
    ("text.replace('a', 'b')", (False, False, False)),
])
def test_the_detectors(sample, expected):
    call = ast.parse(sample).body[0].value
    assert (_prints(call), _to_stderr(call), _writes_file(call)) == expected


# The map: the first code block of docs/architecture.md, a tree of folders and modules.
_NAME = re.compile(r"^(?:[A-Za-z_]\w*\.py|[A-Za-z_]\w*/)$")


def _map() -> set[str]:
    """Every path the map names, relative to nccl_bench/ ('cli/', 'cli/entry.py', ...)."""
    block = re.search(r"^```\n(nccl_bench/\n.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M).group(1)
    named: set[str] = set()
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders the current line is inside
    for line in block.splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        tokens = []
        for token in line.split():
            if not _NAME.match(token):
                break
            tokens.append(token)
        if not tokens:
            continue  # a description's second line
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        for token in tokens:
            named.add(parent + token)
            if token.endswith("/"):
                folders.append((indent, parent + token))
    return named


def _package() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if path.name != "__init__.py":
            found.add(relative.as_posix())
        found.update(f"{parent.as_posix()}/" for parent in relative.parents if parent != Path("."))
    return found


def test_every_module_on_the_map_exists():
    assert sorted(_map() - _package()) == []


def test_every_module_is_on_the_map():
    assert sorted(_package() - _map()) == []


def test_the_import_diagram_is_the_layers():
    """The arrow line of "Direction of imports": each group one layer, higher layers first."""
    arrows = next(line for line in DOC.read_text(encoding="utf-8").splitlines() if "──>" in line)
    groups = [[name.strip() for name in group.split(",")] for group in arrows.split("──>")]
    assert sorted(name for group in groups for name in group) == sorted(LAYERS)
    levels = [{LAYERS[name][0] for name in group} for group in groups]
    assert all(len(level) == 1 for level in levels), groups
    order = [level.pop() for level in levels]
    assert order == sorted(order, reverse=True) and len(set(order)) == len(order), groups


def test_results_imports_only_the_standard_library_at_module_level():
    import sys

    for module, tree in MODULES.items():
        if not module.startswith("results"):
            continue
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                root = name.split(".")[0]
                assert root in sys.stdlib_module_names or root in ("nccl_bench", "__future__"), (module, name)


# Modules that take values and return values: no file, no terminal.
PURE = ("units.", "comparison", "sweep.baseline_check", "sweep.busbw_floor", "sweep.variants", "doctor.schedule",
        "doctor.verdicts", "doctor.roster", "history.rule", "history.address", "replay.trace_vocabulary",
        "replay.profile", "replay.replay_plan")
# What measures on ranks: the CLI loads it only on use, inside the function that runs a command. The
# small rank-side modules the shell reads before that (layouts, process limits, signals) import no torch.
RANK_SIDE = ("ranks.session", "ranks.dist", "ranks.runner", "ranks.collectives", "sweep.sweep_body",
             "doctor.doctor_body", "sweep.plan", "replay.replay_body")
# The process's start: what `nccl-bench --help` and an argument error load.
START = ("cli.entry", "__main__")
# What the CLI calls in sweep/, doctor/ and replay/: their entry modules; their bodies and plans stay behind them.
ENTRY_MODULES = ("nccl_bench.sweep.sweep_entry", "nccl_bench.doctor.doctor_entry", "nccl_bench.replay.replay_entry")
BEHIND_THE_ENTRIES = ("nccl_bench.sweep.sweep_body", "nccl_bench.sweep.plan", "nccl_bench.sweep.baseline_check",
                      "nccl_bench.sweep.saved_baselines", "nccl_bench.doctor.doctor_body",
                      "nccl_bench.replay.replay_body", "nccl_bench.replay.replay_plan")

def test_pure_modules_read_and_write_nothing():
    io_calls = {"open", "read_text", "read_bytes", "iterdir", "stat", "exists"}
    for module, tree in MODULES.items():
        if module.startswith(PURE):
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = _dotted(node.func)
                    assert not (_prints(node) or _writes_file(node) or name.rsplit(".", 1)[-1] in io_calls
                                or name.startswith("os.")), (module, name)


def _imported_names(node: ast.AST) -> list[str]:
    """'nccl_bench.sweep.sweep_entry' for `from nccl_bench.sweep import sweep_entry` (the module, each name in it)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def _loaded_at_start() -> set[str]:
    """Every module of the package that START loads: module-level imports followed to any depth (a
    module's packages included), the names that are no module left out."""
    seen: set[str] = set()
    todo = list(START)
    while todo:
        module = todo.pop()
        if module in seen or module not in MODULES:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:length]) for length in range(1, len(parts))]
        todo += [name[len("nccl_bench."):] for node in MODULES[module].body for name in _imported_names(node)
                 if name.startswith("nccl_bench.")]
    return seen


def test_the_cli_loads_the_rank_side_only_on_use():
    loaded = _loaded_at_start()
    assert {"cli.entry", "cli.sweep", "cli.doctor", "options"} <= loaded  # the commands and their options: yes
    assert sorted(m for m in loaded if m in RANK_SIDE) == []
    heavy = {m for m in loaded for node in MODULES[m].body for name in _imported_names(node)
             if name.split(".")[0] in ("torch", "pandas", "matplotlib")}
    assert heavy == set()


# Who reads a clock to measure a duration, and why. The collectives are timed in ranks/runner.py alone.
DURATIONS = {
    "ranks.runner": "the collectives timed: warmup, calibration, timed samples (CUDA events on a GPU)",
    "ranks.session": "set-up costs: the process group made (init_s), the first collective (first_op_s)",
    "sweep.sweep_body": "a set-up cost: --split's groups made (split_s)",
    "doctor.doctor_body": "the doctor's wall time, for its report",
    "ranks.deadline": "the per-step deadline",
    "ranks.faults": "the grace a stopping rank gives a signal",
    "ranks.roll_call": "how long a roll call waits for the other ranks",
    "ranks.set_up": "the set-up watch: how long since a set-up step last made progress",
    "hardware.host": "the host's memory-copy probe (a peak, not a result)",
    "history.store_guard": "how long a call has waited for the history (--history-wait), and when to say so",
}
_DURATION_CLOCKS = {"time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.monotonic_ns"}


def _reads_a_duration_clock(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and (_dotted(node) in _DURATION_CLOCKS or node.attr == "elapsed_time")


def test_who_measures_durations():
    readers = {module for module, tree in MODULES.items() if any(map(_reads_a_duration_clock, ast.walk(tree)))}
    assert readers == set(DURATIONS)


def test_set_up_costs_are_recorded_through_one_call():
    """A body's set-up cost goes into meta.json's timings through Run.time_set_up (the slowest rank's)."""
    calls = {module for module, tree in MODULES.items() if any(
        isinstance(node, ast.Call) and _dotted(node.func).endswith(".time_set_up") for node in ast.walk(tree))}
    assert calls == {"sweep.sweep_body"}


# The libraries that turn values into something to read: imported by render/ and by the shell only.
RENDER_TOOLS = ("rich", "matplotlib", "html", "xml")


def test_what_renders_lives_in_render():
    importers = {module for module, tree in MODULES.items() for node in ast.walk(tree)
                 if any(name.split(".")[0] in RENDER_TOOLS for name in _imported_names(node))}
    assert "render.live" in importers
    assert sorted(m for m in importers if not m.startswith(("render.", "cli."))) == []


def test_the_public_names_for_analysis_scripts():
    import nccl_bench.results as results

    assert {"load_frame", "read_rows", "load_rows", "ResultRow"} <= set(results.__all__)


def _callers(name: str) -> set[str]:
    return _who(lambda call: _dotted(call.func).rsplit(".", 1)[-1] == name)


def test_every_failure_is_mapped_by_one_function():
    """faults.why_stopped maps a failure to the rank at fault: the life cycle calls it, and the deadline's
    stall report (in faults.py) goes through it too."""
    assert _callers("why_stopped") == {"ranks.session", "ranks.faults"}


def test_one_launcher_less_path():
    assert _callers("run_local_workers") == {"cli.local_workers"}


def test_the_cli_calls_the_commands_on_ranks_through_their_entry_modules():
    for module, tree in MODULES.items():
        if module.startswith("cli."):
            for node in ast.walk(tree):
                assert not any(name.startswith(BEHIND_THE_ENTRIES) for name in _imported_names(node)), (module,
                                                                                                       node.lineno)
    called = {name for module, tree in MODULES.items() if module.startswith("cli.")
              for node in ast.walk(tree) for name in _imported_names(node)}
    assert set(ENTRY_MODULES) <= called
