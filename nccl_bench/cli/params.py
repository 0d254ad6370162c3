"""A declared option (nccl_bench.options) as a typer parameter.

A command's parameters are named after the config keys they set, so the values for a config are
read off the parameters by key, with no second list of names.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import typer

from nccl_bench.options import Option


def param(option: Option, **fill: str) -> Any:
    """The typer parameter of `option`; `fill` completes a help text that several commands share."""
    flags = option.flags if option.off is None else (*option.flags[:-1], f"{option.flags[-1]}/{option.off}")
    return typer.Option(option.default, *flags, help=option.help.format(**fill) if fill else option.help,
                        metavar=option.metavar)


def values_of(options: Iterable[Option], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The command's value for each of `options`, keyed as the config is."""
    return {option.key: parameters[option.key] for option in options}


def read_given(option: Option, value: Any) -> Any:
    """The value checked by its option, or None when the option was not given."""
    return None if value is None else option.read(value)
