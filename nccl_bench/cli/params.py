"""A declared option or argument (nccl_bench/options.py) as a typer parameter: the one place the CLI
makes typer parameters.

A command's parameters are named after the config keys they set, so the values for a config are
read off the parameters by key, with no second list of names.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import typer

from nccl_bench.option_types import Argument, Option


def param(option: Option, *, given_default: bool = False, prefix: str = "",
          callback: Callable[[Any], None] | None = None, is_eager: bool = False, **fill: str) -> Any:
    """The typer parameter of `option`; `fill` completes a help text that several commands share.

    given_default: the command line itself holds the declared default when the option is absent
    (help shows it as [default: X]); otherwise an absent option is None, and the config or the
    command takes the default later (a preset may still set it). prefix: a condition the command
    puts before the help, e.g. "With --baseline".
    """
    flags = option.flags if option.off is None else (*option.flags[:-1], f"{option.flags[-1]}/{option.off}")
    help_text = option.help.format(**fill) if fill else option.help
    if prefix:
        help_text = f"{prefix}: {help_text[:1].lower()}{help_text[1:]}"
    default = None
    if given_default:
        default = option.default if isinstance(option.default, bool) else option.shown
    return typer.Option(default, *flags, help=help_text, metavar=option.metavar, callback=callback,
                        is_eager=is_eager)


def argument(declared: Argument) -> Any:
    """The typer parameter of a required positional argument."""
    return typer.Argument(..., help=declared.help, metavar=declared.name)


def values_of(options: Iterable[Option], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The command's value for each of `options`, keyed as the config is."""
    return {option.key: parameters[option.key] for option in options}


def read_given(option: Option, value: Any) -> Any:
    """The value checked by its option, or None when the option was not given."""
    return None if value is None else option.read(value)


def read_or_default(option: Option, value: Any) -> Any:
    """The value checked by its option, or the option's declared default when it was not given."""
    return option.read_default() if value is None else option.read(value)
