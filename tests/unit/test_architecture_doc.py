"""What docs/architecture.md says of the code, checked on the source: every module on its map exists
and every module is on it; every module, path and name it gives in backticks exists; its import
diagram is test_architecture's LAYERS; who prints, writes to stderr, writes files, opens the history,
reads a clock, ends the process, imports pandas or the rendering libraries.

Nothing here lists modules: each test finds on the source who does a thing and compares that with the
modules the page names for it, so a module that starts or stops doing it fails here until the page
says so.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

from tests.unit.test_architecture import LAYERS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nccl_bench"
DOC = ROOT / "docs" / "architecture.md"
TEXT = DOC.read_text(encoding="utf-8")
FLAT = " ".join(TEXT.split())  # the page's sentences, whatever their line breaks

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


def _bullet(title: str) -> str:
    """The text of the page's bullet `- **title**...`, up to the next bullet, heading or blank line."""
    found = re.search(rf"^- \*\*{re.escape(title)}\*\*(.*?)(?=^- \*\*|^#|^\s*$)", TEXT, re.S | re.M)
    assert found, f"docs/architecture.md has no bullet **{title}**"
    return " ".join(found.group(1).split())


def _between(text: str, start: str, end: str | None = None) -> str:
    """The part of `text` after `start` ('': from its beginning) and before `end`."""
    assert start in text, start
    after = text.split(start, 1)[1] if start else text
    if end is not None:
        assert end in after, end
        after = after.split(end, 1)[0]
    return after


def _module_of(token: str) -> str | None:
    """The module or package a backticked path names: 'cli/' -> 'cli', 'render/live.py' and
    'render/live.write_prom' -> 'render.live', 'comparison.py' -> 'comparison'; None for anything else."""
    token = token.split("(", 1)[0]
    folder, _, rest = token.rpartition("/")
    if not rest:
        return folder.replace("/", ".") if folder else None
    if not folder and not rest.endswith(".py"):
        return None
    name = ".".join(part for part in (folder.replace("/", "."), rest.split(".", 1)[0]) if part)
    return name if name in MODULES else None


def _named(text: str) -> set[str]:
    """Every module and package that `text` names as a backticked path (a folder, a .py, a module's name)."""
    return {module for token in re.findall(r"`([^`]+)`", text) if (module := _module_of(token)) is not None}


def _under(module: str, names: set[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def _backticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)



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


def _raw_output(call: ast.Call) -> bool:
    """A write to the process's stdout or stderr file descriptor, underneath Python's streams."""
    return _dotted(call.func) == "os.write" and _fd(call) in (1, 2)


def test_only_the_modules_named_print():
    printing = _bullet("Printing")
    says = _named(_between(printing, "only", " print."))
    printers = _who(_prints) - _who(_raw_output)
    assert sorted(m for m in printers if not _under(m, says)) == []
    assert {m for m in _named(printing) if "." in m} <= printers  # each module named (not a folder) prints


def test_every_stderr_line_goes_through_the_modules_named():
    stderr = _bullet("stderr")
    assert _who(_to_stderr) == _named(stderr)
    assert _who(_raw_output) == _named(_between(stderr, "underneath:"))


def test_who_writes_files():
    assert _who(_writes_file) == _named(_between(_bullet("Files"), "The modules that write files"))


def test_no_render_module_opens_a_file():
    files = _bullet("Files")
    assert "no module of `render/` opens a file" in files
    assert {m for m in _who(_writes_file) if m.startswith("render.")} == set()
    [drawer] = re.findall(r"`([^`]+)`, the one call of `savefig`", files)
    assert _who(lambda call: _dotted(call.func).endswith(".savefig")) == {_module_of(drawer)}


def test_one_module_opens_the_history():
    opens = _who(lambda call: _dotted(call.func) in ("sqlite3.connect", "psycopg.connect"))
    assert opens == _named(_between(_bullet("The history"), "", "is the one module"))


def test_only_the_cli_ends_the_process():
    enders = {module for module, tree in MODULES.items() if any(_ends_process(node) for node in ast.walk(tree))}
    assert enders and all(module.startswith("cli.") for module in enders), enders


def test_pandas_is_imported_only_inside_the_functions_named():
    importers = set()
    for module, tree in MODULES.items():
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(name.split(".")[0] == "pandas" for name in names):
                    importers.add((module, function.name))
    named = _between(_bullet("pandas"), "imported only inside", ", and")
    assert importers == {(_module_of(token), token.rsplit(".", 1)[1]) for token in _backticked(named)}


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

    for module, tree in MODULES.items():
        if not module.startswith("results"):
            continue
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                root = name.split(".")[0]
                assert root in sys.stdlib_module_names or root in ("nccl_bench", "__future__"), (module, name)


def test_pure_modules_read_and_write_nothing():
    """The modules the page calls pure: no file, no terminal, nothing of the operating system."""
    pure = _named(_between(_bullet("Pure modules"), "", "read and write nothing"))
    assert pure
    io_calls = {"open", "read_text", "read_bytes", "iterdir", "stat", "exists"}
    for module, tree in MODULES.items():
        if _under(module, pure):
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


def _ours(name: str) -> str | None:
    """'sweep.sweep_entry' for an imported 'nccl_bench.sweep.sweep_entry', None for a name outside the package."""
    return name[len("nccl_bench."):] if name.startswith("nccl_bench.") else None


def _module_level_closure(start: set[str]) -> set[str]:
    """The package's modules that `start` loads: module-level imports followed to any depth (a module's
    packages included), the names that are no module left out."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in seen or module not in MODULES:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:length]) for length in range(1, len(parts))]
        todo += [ours for node in MODULES[module].body for name in _imported_names(node)
                 if (ours := _ours(name)) is not None]
    return seen


def _start() -> set[str]:
    """Where the process starts: `python -m nccl_bench` and the module of pyproject's `nccl-bench` script."""
    script = re.search(r'^nccl-bench = "nccl_bench\.([\w.]+):\w+"', (ROOT / "pyproject.toml").read_text(), re.M)
    return {"__main__", script.group(1)}


def _loaded_at_start() -> set[str]:
    return _module_level_closure(_start())


def _imports(tree: ast.Module, root: str) -> bool:
    """The module imports `root` (or a module of it) anywhere, inside functions too."""
    return any(name == root or name.startswith(root + ".") for node in ast.walk(tree) for name in _imported_names(node))


@functools.cache  # the source is read once; the answer does not change within a run
def _defining(name: str) -> set[str]:
    """The modules that define a function or class called `name` at their top level."""
    return {module for module, tree in MODULES.items() for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name}


@functools.cache
def _life_cycle() -> str:
    """The module of the shared run life cycle: the one that declares what a command's body is (RunBody)."""
    [module] = _defining("RunBody")
    return module


@functools.cache
def _bodies() -> set[str]:
    """The commands' bodies on the life cycle: the modules that import it at module level."""
    return {module for module, tree in MODULES.items() for node in tree.body
            if any(_ours(name) in (_life_cycle(), f"{_life_cycle()}.execute") for name in _imported_names(node))}


def _rank_side() -> set[str]:
    """What measures on ranks: the life cycle, the bodies, and what they load at module level that uses torch."""
    loaded = _module_level_closure(_bodies() | {_life_cycle()})
    return {module for module in loaded if _imports(MODULES[module], "torch")} | _bodies() | {_life_cycle()}


def test_the_process_starts_where_the_page_says():
    assert _start() == _named(_between(_bullet("The rank side, from the CLI"), "from the process's start", "reaches"))


def test_the_cli_loads_the_rank_side_only_on_use():
    loaded = _loaded_at_start()
    assert _commands_on_ranks() <= loaded  # the commands and their options answer --help at once
    read_first = _named(_between(_bullet("The rank side, from the CLI"), "they are", "No chain"))
    assert {m for m in loaded if m.startswith("ranks.")} == read_first
    assert sorted((loaded & _rank_side()) - read_first) == []
    heavy = {m for m in loaded for node in MODULES[m].body for name in _imported_names(node)
             if name.split(".")[0] in ("torch", "pandas", "matplotlib")}
    assert heavy == set()


_DURATION_CLOCKS = {"time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.monotonic_ns"}


def _reads_a_duration_clock(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and (_dotted(node) in _DURATION_CLOCKS or node.attr == "elapsed_time")


def test_who_measures_durations():
    """The modules that read a clock for a duration are the ones the page names, each with its reason."""
    readers = {module for module, tree in MODULES.items() if any(map(_reads_a_duration_clock, ast.walk(tree)))}
    assert readers == _named(_bullet("Timing"))


def test_the_collectives_whose_time_is_a_result_are_timed_in_one_module():
    """What turns a duration into a result (Measurement) is built in one module, the one the page names first."""
    timing = _bullet("Timing")
    [first] = [m for m in map(_module_of, _backticked(timing)) if m is not None][:1]
    measurement = {module for module, tree in MODULES.items() for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and _dotted(node.func) == "Measurement"}
    assert measurement == {first} == _defining("Measurement")


def _writes_attribute(node: ast.AST, name: str) -> bool:
    """`x.name = ...`, `x.name[k] = ...` or `x.name.update(...)`."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute) and t.attr == name
                   or isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == name
                   for t in targets)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == name)


def test_set_up_costs_are_recorded_through_one_call():
    """A body's set-up cost goes into meta.json's timings through Run.time_set_up (the slowest rank's):
    no module but the life cycle writes a run's timings."""
    [call] = [token for token in _backticked(_bullet("Timing")) if token.endswith(".time_set_up")]
    owner = call.split(".")[0]
    assert {module for module, tree in MODULES.items() if any(_writes_attribute(node, "timings")
                                                               for node in ast.walk(tree))} == _defining(owner)
    assert _defining(owner) == {_life_cycle()}


def test_what_renders_lives_in_render():
    tools = _backticked(_between(FLAT, "the libraries that render,", "are imported only there"))
    assert tools
    importers = {module for module, tree in MODULES.items() for node in ast.walk(tree)
                 if any(name.split(".")[0] in tools for name in _imported_names(node))}
    assert "render.live" in importers
    assert sorted(m for m in importers if not m.startswith(("render.", "cli."))) == []


def test_the_public_names_for_analysis_scripts():
    import nccl_bench.results as results

    named = _between(FLAT, "Public names for analysis scripts stay in `nccl_bench.results` (", ";")
    assert _backticked(named) and set(_backticked(named)) <= set(results.__all__)


def _callers(name: str) -> set[str]:
    return _who(lambda call: _dotted(call.func).rsplit(".", 1)[-1] == name)


def test_every_failure_is_mapped_by_one_function():
    """faults.why_stopped maps a failure to the rank at fault: the life cycle calls it, and the deadline's
    stall report (in the module that defines it) goes through it too."""
    assert "Every failure is mapped once, by `faults.why_stopped`" in FLAT
    assert _callers("why_stopped") == {_life_cycle()} | _defining("why_stopped")


def _commands_on_ranks() -> set[str]:
    """The cli modules that hand a command to the one fork of every command on ranks."""
    [fork] = [t for t in _backticked(_between(TEXT, "\n`cli/on_ranks.run_on_ranks`")) if "run_on_ranks" in t][:1]
    return {m for m in _callers(fork.rsplit(".", 1)[1]) if m.startswith("cli.")} - {_module_of(fork)}


def test_the_page_names_every_command_on_ranks():
    """'Every command that runs on ranks (sweep, doctor, replay)': the commands the cli hands to run_on_ranks."""
    said = re.search(r"Every command that runs on ranks \(([^)]*)\)", FLAT).group(1)
    assert {name.strip() for name in said.split(",")} == {m.split(".", 1)[1] for m in _commands_on_ranks()}
    assert {m.split(".")[0] for m in _bodies()} == {m.split(".", 1)[1] for m in _commands_on_ranks()}


def test_the_body_s_steps_are_the_ones_the_page_lists():
    said = re.search(r"supplies only its own body \(([^)]*)\)", FLAT).group(1)
    [body] = [node for node in MODULES[_life_cycle()].body if isinstance(node, ast.ClassDef) and node.name == "RunBody"]
    steps = {node.name for node in body.body if isinstance(node, ast.FunctionDef)}
    assert set(_backticked(said)) == steps


def test_one_launcher_less_path():
    paragraph = _between(TEXT, "\n`cli/on_ranks.run_on_ranks`", "\n\n")
    [launch] = [t for t in _backticked(paragraph) if t.endswith(".run_local_workers")]
    assert _callers(launch.rsplit(".", 1)[1]) == {"cli.local_workers"} & _named(paragraph)


def test_the_cli_calls_the_commands_on_ranks_through_their_entry_modules():
    """Each command on ranks has one entry module, the one the page names; the cli imports from the
    command's package only that module and what the entry itself imports at module level (the types it
    hands back), never what the entry loads only when it runs (the body, the sweep's plan)."""
    entries = _named(_between(_bullet("The commands on ranks, from the CLI"), "through its entry module", ")"))
    packages = {m.split(".")[0] for m in _bodies()}
    assert {m.split(".")[0] for m in entries} == packages and len(entries) == len(packages)
    cli_imports = {ours for module, tree in MODULES.items() if module.startswith("cli.") for node in ast.walk(tree)
                   for name in _imported_names(node) if (ours := _ours(name)) in MODULES}
    for entry in entries:
        package = entry.split(".")[0]
        handed_back = _module_level_closure({entry})
        behind = {ours for node in ast.walk(MODULES[entry]) for name in _imported_names(node)
                  if (ours := _ours(name)) in MODULES} - handed_back
        assert entry in cli_imports
        assert sorted(m for m in cli_imports if m.startswith(package + ".") and m not in handed_back) == []
        assert behind & _bodies(), (entry, behind)  # the body loads only when the command runs


def test_every_module_path_and_name_the_page_gives_exists():
    """A backticked path (a folder, a .py, a module's name such as `render/live.write_prom` or
    `faults.why_stopped`) names something that is there."""
    prose = re.sub(r"^```.*?^```", "", TEXT, flags=re.S | re.M)  # the map and the diagram hold no backticks
    tokens = set(_backticked(prose))
    assert {"cli/on_ranks.run_on_ranks", "faults.why_stopped"} <= tokens  # what the page's sentences name is read
    for token in tokens:
        token = token.split("(", 1)[0]
        if token.startswith(("-", "/", ".")) or "<" in token or " " in token:
            continue
        if "/" in token and (token.endswith(("/", ".py"))):
            assert (ROOT / token).exists() or (PACKAGE / token).exists(), token
        elif re.fullmatch(r"(?:[\w/]+/)?\w+\.\w+", token) and not token.endswith(".py"):
            _check_attribute(token)


def _check_attribute(token: str) -> None:
    """`folder/module.name` or `module.name` or `Class.method` names a definition of the package."""
    path, name = token.rsplit(".", 1)
    folder, _, stem = path.rpartition("/")
    modules = [m for m in MODULES if m.split(".")[-1] == stem and m.startswith(folder.replace("/", "."))]
    if not modules:
        classes = [node for tree in MODULES.values() for node in tree.body
                   if isinstance(node, ast.ClassDef) and node.name == stem]
        if not classes and stem in sys.modules or stem in ("nccl_bench", "sqlite3", "typer", "torch", "os", "sys"):
            return  # a library's name (torch.distributed, typer.Exit, os._exit)
        assert any(isinstance(n, ast.FunctionDef) and n.name == name for c in classes for n in c.body), token
        return
    assert any(_defines(MODULES[m], name) for m in modules), token


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False
