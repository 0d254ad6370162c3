"""What an option is (Option, Argument) and the parsers that check a value: each returns the value
checked and converted, or raises UserInputError naming the option. Plain code, cheap to import;
nccl_bench/options.py declares every option of every command with these.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable, NamedTuple

from nccl_bench.errors import UserInputError
from nccl_bench.units.sizes import format_size, parse_size

Parser = Callable[[Any, str], Any]  # (raw value, the option as an error names it) -> the checked value


class PerDevice(NamedTuple):
    """A default that depends on the device the ranks run on."""

    gpu: Any
    cpu: Any


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def shown(value: Any, each: Callable[[Any], str] = _plain) -> str:
    """A default as a help writes it: '5', 'on', '50 on GPU, 200 on CPU'."""
    if isinstance(value, PerDevice):
        return f"{each(value.gpu)} on GPU, {each(value.cpu)} on CPU"
    return each(value)


class Option:
    """One option. `help` may hold {default} (the declared default, as `show` writes it) and {fields}
    that the command using it fills in."""

    __slots__ = ("key", "flags", "parse", "help", "default", "shown", "off", "metavar", "many")

    def __init__(self, key: str, flags: tuple[str, ...], parse: Parser, help: str, default: Any = None,
                 off: str | None = None, metavar: str | None = None, show: Callable[[Any], str] = shown,
                 many: bool = False):
        self.key = key  # the config field, and the key a preset file uses
        self.flags = flags  # as typed on the command line; errors name the long one
        self.parse = parse
        # What the option amounts to when it is not given, as a value its parser accepts (a PerDevice
        # when it depends on the device); None: nothing, or a choice made at run time that the help
        # describes in words.
        self.default = default
        self.shown = None if default is None else show(default)
        self.help = help if self.shown is None else help.replace("{default}", self.shown)
        self.off = off  # the flag that turns a switch off, e.g. --no-check
        self.metavar = metavar
        self.many = many  # given any number of times, each value kept (the parser reads them together)

    def __repr__(self) -> str:
        return f"Option({self.key!r}, {self.flags!r})"

    @property
    def given_as(self) -> type:
        """What the command line hands the parser: a list of texts, or the parser's own kind of value."""
        return list[str] if self.many else getattr(self.parse, "given_as", str)

    @property
    def name(self) -> str:
        return next(flag for flag in self.flags if flag.startswith("--"))

    @property
    def takes_value(self) -> bool:
        """False for a switch, which the command line gives without a value."""
        return self.parse is not switch

    def read(self, value: Any, source: str = "") -> Any:
        """The value checked and converted; an error names the flag, or `FILE: key` for a preset file."""
        return self.parse(value, f"{source}: {self.key}" if source else self.name)

    def read_default(self) -> Any:
        """The declared default, checked and converted as a given value would be."""
        return self.read(self.default)


class Argument:
    """One positional argument: its parameter's name, the name help and errors give it, its help."""

    __slots__ = ("key", "name", "help", "many")

    def __init__(self, key: str, name: str, help: str, many: bool = False):
        self.key = key
        self.name = name  # BASELINE, RUN...: the metavar, as messages name the argument
        self.help = help
        self.many = many  # one or more values

    @property
    def given_as(self) -> type:
        return list[str] if self.many else str

    def __repr__(self) -> str:
        return f"Argument({self.key!r}, {self.name!r})"


# -- parsers ------------------------------------------------------------------------------------------
def _given_as(kind: type, parse: Parser) -> Parser:
    """The parser, marked with the kind of value the command line hands it (text when unmarked)."""
    parse.given_as = kind  # type: ignore[attr-defined]
    return parse


def whole(minimum: int | None = 1, maximum: int | None = None) -> Parser:
    """A whole number within [minimum, maximum] (None: unbounded on that side)."""

    def parse(value: Any, option: str) -> int:
        try:
            number = int(value)
            if number != float(value):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            raise UserInputError(option, f"expected a whole number, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise UserInputError(option, f"must be at least {minimum}, got {number}")
        if maximum is not None and number > maximum:
            raise UserInputError(option, f"must be at most {maximum:,}, got {number:,}")
        return number

    return _given_as(int, parse)


def number(above: float = 0.0) -> Parser:
    """A finite number greater than `above` (and than 0); inf and nan mean no number (strict JSON has neither)."""

    def parse(value: Any, option: str) -> float:
        try:
            checked = float(value)
        except (TypeError, ValueError):
            raise UserInputError(option, f"expected a number, got {value!r}") from None
        if not math.isfinite(checked):
            raise UserInputError(option, f"expected a finite number, got {value!r}")
        for bound in sorted({0.0, above}):
            if not checked > bound:
                raise UserInputError(option, f"must be greater than {bound:g}, got {value!r}")
        return checked

    return _given_as(float, parse)


def fraction(value: Any, option: str) -> float:
    """A share from 0 up to (not including) 1, as a tolerance is once its text is read."""
    try:
        checked = float(value)
    except (TypeError, ValueError):
        raise UserInputError(option, f"expected a number, got {value!r}") from None
    if not 0 <= checked < 1:
        raise UserInputError(option, f"must be a fraction from 0 up to 1, got {value!r}")
    return checked


_TOLERANCE_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")


def tolerance(value: Any, option: str) -> float:
    """Text as typed, '10%' or '0.1', -> 0.1; a bare number of 1 or more is refused as ambiguous.
    A number that is not text (a config's value) is a fraction already."""
    if not isinstance(value, str):
        return fraction(value, option)
    match = _TOLERANCE_PATTERN.match(value)
    if not match:
        raise UserInputError(option, f"expected a percentage like 10% or a fraction like 0.1, got {value!r}")
    share, percent = float(match.group(1)), match.group(2)
    if percent:
        if share >= 100:
            raise UserInputError(option, f"must be below 100%, got {value!r}")
        return share / 100
    if share >= 1:
        raise UserInputError(option, f"{value!r} is ambiguous; write {share:g}% or a fraction below 1 like 0.1")
    return share


def percent(share: float) -> str:
    return f"{share * 100:g}%"


def choice(*choices: str) -> Parser:
    """One of `choices`, in any case."""

    def parse(value: Any, option: str) -> str:
        lowered = str(value).lower()
        if lowered not in choices:
            raise UserInputError(option, f"{lowered!r} is not one of {', '.join(choices)}")
        return lowered

    return parse


def switch(value: Any, option: str) -> bool:
    if not isinstance(value, bool):
        raise UserInputError(option, f"expected true or false, got {value!r}")
    return value


def path(value: Any, option: str) -> Path:
    return Path(value)


_given_as(bool, switch)
_given_as(Path, path)


def text(value: Any, option: str) -> str:
    return str(value)


def size(minimum: int = 1, why: str = "") -> Parser:
    """A byte size (8, 1K, 64M, 1G) of at least `minimum` bytes; `why` says where a minimum above 1 comes from."""

    def parse(value: Any, option: str) -> int:
        checked = parse_size(value, option)
        if checked < minimum:
            raise UserInputError(option, f"must be at least {minimum} bytes ({why}), got {checked}")
        return checked

    return parse


def shown_size(value: Any) -> str:
    return shown(value, format_size)


def expand_choices(values, choices: tuple[str, ...], option: str, noun: str, normalize=str.strip) -> tuple[str, ...]:
    """Names that may repeat or hold commas, 'all' meaning every choice; first-seen order, no repeats."""
    expanded: list[str] = []
    for value in values:
        for part in str(value).split(","):
            part = normalize(part.strip())
            if not part:
                continue
            for candidate in choices if part == "all" else (part,):
                if candidate not in choices:
                    raise UserInputError(option, f"unknown {noun} {part!r}; choose from {', '.join(choices)} or all")
                if candidate not in expanded:
                    expanded.append(candidate)
    if not expanded:
        raise UserInputError(option, f"no {noun} given")
    return tuple(expanded)
