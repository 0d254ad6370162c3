"""An option is one field: a dataclass field made by option_types.option is, with nothing else written,
the command's parameter in `--help`, a value of the built dataclass, and a key its preset file accepts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import typer
from typer.testing import CliRunner

from nccl_bench.cli.params import command_of
from nccl_bench.errors import OptionError, UserInputError
from nccl_bench.option_types import Option, build_config, option, path, whole


@dataclass(frozen=True)
class Throwaway:
    PRESET: ClassVar[Option] = Option("preset", ("--config",), path, "TOML preset.")

    rounds: int = option(("--rounds",), whole(1, 9), "Rounds to run (default {default}).", default=3)


def _app(seen: list) -> typer.Typer:
    app = typer.Typer(add_completion=False, rich_markup_mode=None)

    @app.command()
    @command_of
    def run(config: Throwaway) -> None:
        """Run the throwaway."""
        seen.append(config)
        if config.rounds == 9:
            raise OptionError("rounds", "nine rounds mention {rounds} by key", mentions=("rounds",))

    return app


def test_the_field_is_the_commands_option_in_help():
    result = CliRunner().invoke(_app([]), ["--help"])
    assert "--rounds" in result.output and "Rounds to run (default 3)." in result.output
    assert "--config" in result.output


def test_the_field_is_read_into_the_built_dataclass_by_its_parser():
    seen: list = []
    assert CliRunner().invoke(_app(seen), ["--rounds", "5"]).exit_code == 0
    assert CliRunner().invoke(_app(seen), []).exit_code == 0
    assert seen == [Throwaway(rounds=5), Throwaway(rounds=3)]
    refused = CliRunner().invoke(_app(seen), ["--rounds", "10"])
    assert isinstance(refused.exception, UserInputError)
    assert str(refused.exception) == "--rounds: must be at most 9, got 10"


def test_an_error_raised_by_key_is_said_with_the_flag():
    refused = CliRunner().invoke(_app([]), ["--rounds", "9"])
    assert str(refused.exception) == "--rounds: nine rounds mention --rounds by key"


def test_the_preset_reads_the_field_and_refuses_an_unknown_key(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("rounds = 7\n")
    assert build_config(Throwaway, {}, preset) == Throwaway(rounds=7)
    assert build_config(Throwaway, {"rounds": "2"}, preset) == Throwaway(rounds=2)  # a flag given wins
    seen: list = []
    assert CliRunner().invoke(_app(seen), ["--config", str(preset)]).exit_code == 0
    assert seen == [Throwaway(rounds=7)]
    preset.write_text("rouns = 7\n")
    with pytest.raises(UserInputError) as info:
        build_config(Throwaway, {}, preset)
    assert str(info.value) == f"{preset}: unknown key 'rouns'; known keys: rounds"
