"""A declared option or argument (nccl_bench/options.py) as a typer parameter: the one place the CLI
makes typer parameters.

A command lists the declarations it takes (`takes`), and its parameters are made from them: named
after the config keys they set, typed as the declaration's parser is given its value, with the
declaration's flags, help, metavar and default. The command receives the values as one mapping by
key, so an option is written once, in its declaration, and read once, where it acts.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TypeVar

import typer

from nccl_bench.option_types import Argument, Option

Command = TypeVar("Command", bound=Callable[..., Any])


@dataclass(frozen=True)
class Use:
    """How one command shows a declaration: see `param`."""

    given_default: bool = False
    prefix: str = ""
    fill: dict[str, str] = field(default_factory=dict)


def use(*, given_default: bool = False, prefix: str = "", **fill: str) -> Use:
    return Use(given_default, prefix, fill)


def takes(*declared: Option | Argument, **how: Use) -> Callable[[Command], Command]:
    """The command's parameters made from `declared`, in order; `how` (by key) says how this command shows one.

    The command is written `def command(**given)`: typer reads the signature made here, and calls it
    with every parameter's value by key."""
    unknown = set(how) - {item.key for item in declared}
    if unknown:
        raise ValueError(f"no declaration has the key(s) {sorted(unknown)}")

    def made(command: Command) -> Command:
        command.__signature__ = inspect.Signature([_parameter(item, how.get(item.key, Use())) for item in declared])
        return command

    return made


def _parameter(item: Option | Argument, shown: Use) -> inspect.Parameter:
    if isinstance(item, Argument):
        return inspect.Parameter(item.key, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=argument(item),
                                 annotation=item.given_as)
    typed = item.given_as if shown.given_default else Optional[item.given_as]
    return inspect.Parameter(item.key, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typed,
                             default=param(item, given_default=shown.given_default, prefix=shown.prefix, **shown.fill))


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


def read_given(option: Option, value: Any) -> Any:
    """The value checked by its option, or None when the option was not given."""
    return None if value is None else option.read(value)


def read_or_default(option: Option, value: Any) -> Any:
    """The value checked by its option, or the option's declared default when it was not given."""
    return option.read_default() if value is None else option.read(value)
