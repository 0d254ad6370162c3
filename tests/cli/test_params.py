"""cli/params.py: a field's option becomes the typer parameter with the same flags, default and help."""

from __future__ import annotations

import ast
from pathlib import Path

import typer.main

import nccl_bench
from nccl_bench.cli import app
from nccl_bench.cli.option_sets import WORKERS
from nccl_bench.doctor.doctor_config import DoctorConfig
from nccl_bench.option_types import declared
from nccl_bench.replay.replay_config import ReplayConfig
from nccl_bench.sweep.sweep_config import SweepConfig


def _params(command: str) -> dict:
    group = typer.main.get_command(app)
    return {param.name: param for param in group.commands[command].params}


def test_each_declaration_is_its_commands_parameter():
    for command, config in (("sweep", SweepConfig), ("doctor", DoctorConfig)):
        params = _params(command)
        for option in (*(carried.item for carried in declared(config).values()), WORKERS):
            param = params[option.key]  # parameters are named after the keys they set
            assert tuple(param.opts) == option.flags
            assert tuple(param.secondary_opts) == ((option.off,) if option.off else ())
            assert param.help.startswith(option.help.split("{")[0])


def test_shared_help_is_filled_per_command():
    assert "results/<UTC time>_<ops>/" in _params("sweep")["out"].help
    assert "results/<UTC time>_doctor/" in _params("doctor")["out"].help
    assert "stalled collective" in _params("sweep")["timeout_s"].help
    assert "stalled exchange" in _params("doctor")["timeout_s"].help
    # the replay's timing options are the sweep's declarations, --cuda-graph among them
    assert _params("replay")["cuda_graph"].help == _params("sweep")["cuda_graph"].help
    assert tuple(_params("replay")["cuda_graph"].opts) == ("--cuda-graph",)
    assert declared(ReplayConfig)["cuda_graph"].item is declared(SweepConfig)["cuda_graph"].item


def _makes_a_typer_parameter(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):  # typer.Option(...), typer.Argument(...)
        return node.attr in ("Option", "Argument") and getattr(node.value, "id", None) == "typer"
    if isinstance(node, ast.ImportFrom):  # from typer import Option
        return node.module == "typer" and bool({alias.name for alias in node.names} & {"Option", "Argument"})
    return False


def test_typer_parameters_are_made_only_in_params():
    """Every option and argument is a dataclass field, made a typer parameter by cli/params.py."""
    package = Path(nccl_bench.__file__).parent
    made_elsewhere = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in sorted(package.rglob("*.py")) if path != package / "cli" / "params.py"
        for node in ast.walk(ast.parse(path.read_text())) if _makes_a_typer_parameter(node)
    ]
    assert made_elsewhere == []

