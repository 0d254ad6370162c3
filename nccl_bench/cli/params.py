"""Commands whose parameters are dataclasses of declared fields: the one place the CLI makes typer parameters.

A command is written with its parameters readable where it is defined:

    @command_of
    def sweep_command(config: SweepConfig, baseline: BaselineOptions, recording: Recording, local: Workers)

Each annotation is a dataclass whose fields carry their options (option_types.option); `command_of`
makes one typer parameter per field, in field order and annotation order (a config that reads a preset
file adds its option after its fields), each shown as the field says (Shown). When the command runs,
every dataclass is built from the values given (option_types.build_config: defaults < preset < flags,
each value read by its field's parser) and the function is called with the instances. Errors raised
below cli/ name options by key (errors.OptionError); here they get the flags of this command.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable, Optional, TypeVar

import typer

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import Argument, Declared, Option, Shown, build_config, declared, flags_of

Command = TypeVar("Command", bound=Callable[..., Any])


Refused = Callable[[dict[str, Any], UserInputError], None]


def command_of(function: Command | None = None, *, refused: Refused | None = None) -> Any:
    """The command typer calls: its parameters made from the fields of `function`'s dataclass parameters,
    its body `function` called with those dataclasses built and checked. `refused`: called with the values
    as given (unread) and the error when building the dataclasses refuses them, so that a command's output
    files are never left from an earlier run beside the refusal's line (its body never runs)."""
    if function is None:
        return lambda decorated: command_of(decorated, refused=refused)
    parts = [(name, kind) for name, kind in typing.get_type_hints(function).items() if name != "return"]
    parameters = [_parameter(carried) for _, kind in parts for carried in (*declared(kind).values(), *_preset_of(kind))]
    if len({parameter.name for parameter in parameters}) < len(parameters):
        raise TypeError(f"{function.__name__}: two of its dataclasses have a field of the same name")

    @functools.wraps(function, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
    def command(**given: Any) -> Any:
        try:
            with flags_of(*(kind for _, kind in parts)):
                built = {name: build_config(kind, given, _preset_given(kind, given)) for name, kind in parts}
        except UserInputError as exc:
            if refused is not None:
                refused(given, exc)
            raise
        with flags_of(*(kind for _, kind in parts)):
            return function(**built)

    command.__signature__ = inspect.Signature(parameters)  # what typer reads, with the annotations below
    command.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return command


def _preset_of(kind: type) -> tuple[Declared, ...]:
    preset = getattr(kind, "PRESET", None)
    return () if preset is None else (Declared(preset, Shown()),)


def _preset_given(kind: type, given: dict[str, Any]) -> Any:
    preset = getattr(kind, "PRESET", None)
    return None if preset is None or given.get(preset.key) is None else preset.read(given[preset.key])


def _parameter(carried: Declared) -> inspect.Parameter:
    item, shown = carried
    if isinstance(item, Argument):
        return inspect.Parameter(item.key, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=argument(item),
                                 annotation=item.given_as)
    typed = item.given_as if shown.given_default else Optional[item.given_as]
    return inspect.Parameter(item.key, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typed,
                             default=param(item, given_default=shown.given_default, prefix=shown.prefix,
                                           **dict(shown.fill)))


def param(option: Option, *, given_default: bool = False, prefix: str = "",
          callback: Callable[[Any], None] | None = None, is_eager: bool = False, **fill: str) -> Any:
    """The typer parameter of `option`; `fill` completes a help text that several commands share.

    given_default: the command line itself holds the declared default when the option is absent
    (help shows it as [default: X]); otherwise an absent option is None, and the dataclass takes the
    field's default (a preset may still set it). prefix: a condition the command puts before the help,
    e.g. "With --baseline".
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
