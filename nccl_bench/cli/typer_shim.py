"""Where typer or click do not answer as nccl-bench must: plain value conversion (no pydantic on the
way to `--help`), and click's usage errors as the one error line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import typer

from nccl_bench.cli.messages import fail
from nccl_bench.errors import EXIT_BAD_INPUT


class _PlainConversion:
    """Value conversion for options typed str, int, float, bool, Path or a list of str.

    typer >= 0.29 converts every parameter, even an absent one, through a pydantic TypeAdapter
    built on first use, which imports pydantic (~0.1 s) before `sweep --help` or an argument
    error can answer. Every option here needs only these plain conversions; typer calls
    `coerce` on whatever object it holds as the parameter's runtime converter.
    """

    def __init__(self, convert):
        self._convert = convert

    def coerce(self, value, param, ctx):
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        try:
            if isinstance(value, (list, tuple)):
                return [self._convert(item) for item in value]
            return self._convert(value)
        except (TypeError, ValueError):
            problem = f"{value!r} is not a valid {self._convert.__name__}."
            raise typer.BadParameter(problem, ctx=ctx, param=param) from None


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(value)


_PLAIN_CONVERSIONS = {str: str, int: int, float: float, bool: _bool, Path: Path, list[str]: str}


def _commands(group) -> list:
    """The group, its commands, and those of its sub-groups (`history show`)."""
    found = [group]
    for command in getattr(group, "commands", {}).values():
        found += _commands(command)
    return found


def convert_without_pydantic(group) -> None:
    """Give each parameter a plain converter where typer would build a pydantic one (typer >= 0.29;
    older typer converts through click's types and has no such slot, so nothing changes there)."""
    app_settings = dict(group.context_settings or {})
    for command in _commands(group):
        # the help option is made once and cached: made here, it must carry the app's names (-h)
        settings = {**app_settings, **(command.context_settings or {})}
        help_option = command.get_help_option(command.context_class(command, **settings))
        for param in (*command.params, *([help_option] if help_option is not None else [])):
            convert = _PLAIN_CONVERSIONS.get(getattr(getattr(param, "type_descriptor", None), "annotation", None))
            if convert is not None and "_runtime_param" in vars(param) and param._runtime_param is None:
                param._runtime_param = _PlainConversion(convert)


def click_usage_errors() -> tuple[type, ...]:
    """click's exception base: typer >= 0.2x raises its own vendored copy, not the click package's."""
    bases = {cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"}
    try:
        import click

        bases.add(click.exceptions.ClickException)
    except ImportError:
        pass
    return tuple(bases)


def end_usage_error(exc) -> NoReturn:
    """A bad command line: bare `nccl-bench` prints the help on stdout; anything else is one error line. Exit 2."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        print(exc.ctx.get_help(), flush=True)
        sys.exit(EXIT_BAD_INPUT)
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if not message:  # no arguments at all: the help was just printed
        sys.exit(EXIT_BAD_INPUT)
    fail(message, 2)
