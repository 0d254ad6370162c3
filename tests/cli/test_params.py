"""cli/params.py: a declared option becomes the typer parameter with the same flags, default and help."""

from __future__ import annotations

import typer.main

from nccl_bench.cli import app
from nccl_bench.options import DOCTOR_OPTIONS, SWEEP_OPTIONS, WORKERS


def _params(command: str) -> dict:
    group = typer.main.get_command(app)
    return {param.name: param for param in group.commands[command].params}


def test_each_declaration_is_its_commands_parameter():
    for command, declared in (("sweep", SWEEP_OPTIONS), ("doctor", DOCTOR_OPTIONS)):
        params = _params(command)
        for option in (*declared, WORKERS):
            param = params[option.key]  # parameters are named after the keys they set
            assert tuple(param.opts) == option.flags
            assert tuple(param.secondary_opts) == ((option.off,) if option.off else ())
            assert param.help.startswith(option.help.split("{")[0])


def test_shared_help_is_filled_per_command():
    assert "results/<UTC time>_<ops>/" in _params("sweep")["out"].help
    assert "results/<UTC time>_doctor/" in _params("doctor")["out"].help
    assert "stalled collective" in _params("sweep")["timeout_s"].help
    assert "stalled exchange" in _params("doctor")["timeout_s"].help
