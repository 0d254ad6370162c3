"""What an option is (Option, Argument), the parsers that check a value (each returns the value checked
and converted, or raises UserInputError naming the option), and an option as one dataclass field.

An option is one field: `option(...)` makes a dataclasses.field whose default is the declared default
read by its parser and whose metadata holds the declaration (flags, parser, help, metavar, off-flag)
and how a command shows it. The command line (cli/params.py), `--help`, preset keys and validation are
all read from the fields (`declared`, `build_config`). Plain code, cheap to import: `--help` loads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple

from nccl_bench.errors import OptionError, UserInputError
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

    def __init__(self, key: str | None, flags: tuple[str, ...], parse: Parser, help: str, default: Any = None,
                 off: str | None = None, metavar: str | None = None, show: Callable[[Any], str] = shown,
                 many: bool = False):
        self.key = key  # the field it is, and the key a preset file uses (None until its dataclass is read)
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
    """One positional argument: its field's name, the name help and errors give it, its help, its parser
    (which reads every value of an argument given many times at once)."""

    __slots__ = ("key", "name", "help", "many", "parse")

    def __init__(self, key: str | None, name: str, help: str, many: bool = False, parse: Parser | None = None):
        self.key = key
        self.name = name  # BASELINE, RUN...: the metavar, as messages name the argument
        self.help = help
        self.many = many  # one or more values
        self.parse = parse or (lambda value, option: value)

    def read(self, value: Any, source: str = "") -> Any:
        return self.parse(value, self.name)

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


# -- an option as a dataclass field -------------------------------------------------------------------
FIELD = "nccl_bench.option"  # the metadata key under which a field carries its declaration
FROM_FLAGS = "fields_from_flags"  # a config field that, where a config has it, keeps which fields flags set


class Shown(NamedTuple):
    """How a command shows one of its fields' options. given_default: the command line itself holds the
    declared default (help shows [default: X]); otherwise an absent option is None and the field's default
    applies when the config is built (a preset may still set it). prefix: a condition put before the help
    ("With --baseline"). fill: completes a help that several commands share ({folder}, {step}, {what})."""

    given_default: bool = False
    prefix: str = ""
    fill: tuple[tuple[str, str], ...] = ()


class Declared(NamedTuple):
    """What a field carries: its option or argument, and how its command shows it."""

    item: Option | Argument
    shown: Shown


_UNSET: Any = object()


def option(flags: tuple[str, ...] | Option, parse: Parser | None = None, help: str = "", default: Any = None, *,
           off: str | None = None, metavar: str | None = None, show: Callable[[Any], str] = shown,
           many: bool = False, unset: Any = _UNSET, given_default: bool = False, prefix: str = "",
           **fill: str) -> Any:
    """A dataclass field that is an option: `flags` and the rest declare it (see Option), or `flags` is a
    declaration several fields share. The field's default is the declared default as its parser reads it;
    None where the default depends on the device, or `unset` where the config leaves the value open until
    run time. given_default, prefix and fill: how this field's command shows it (Shown)."""
    item = flags if isinstance(flags, Option) else Option(None, tuple(flags), parse, help, default, off, metavar,
                                                          show, many)
    if unset is not _UNSET:
        value = unset
    elif item.default is None or isinstance(item.default, PerDevice):
        value = None
    else:
        value = item.read_default()
    return dataclasses.field(default=value,
                             metadata={FIELD: Declared(item, Shown(given_default, prefix, tuple(fill.items())))})


def argument(item: Argument) -> Any:
    """A dataclass field that is a required positional argument."""
    return dataclasses.field(metadata={FIELD: Declared(item, Shown())})


@functools.cache
def declared(cls: type) -> dict[str, Declared]:
    """The fields of `cls` that are options or arguments, by name, in field order; each declaration's key is
    its field's name (a shared declaration must be used under its own key)."""
    found = {}
    for each in dataclasses.fields(cls):
        carried = each.metadata.get(FIELD)
        if carried is None:
            continue
        if carried.item.key is None:
            carried.item.key = each.name
        elif carried.item.key != each.name:
            raise TypeError(f"{cls.__name__}.{each.name} carries the declaration of {carried.item.key!r}")
        found[each.name] = carried
    return found


def declaration(cls: type, key: str) -> Option:
    """The option that sets field `key` of `cls`."""
    return declared(cls)[key].item


def option_name(cls: type, key: str) -> str:
    """The flag (or an argument's name) that sets field `key` of `cls`, as messages name it."""
    return declared(cls)[key].item.name


def names_of(*classes: type) -> Callable[[str], str]:
    """How a command of these dataclasses names an option by key: its long flag (an argument's name; a
    switch's off-flag under errors.off(key)); a key none of them has is named as it is."""
    from nccl_bench.errors import off

    names = {}
    for cls in classes:
        for key, carried in declared(cls).items():
            names[key] = carried.item.name
            if getattr(carried.item, "off", None):
                names[off(key)] = carried.item.off
    return lambda key: names.get(key, key)


@contextlib.contextmanager
def flags_of(*classes: type) -> Iterator[None]:
    """An OptionError raised inside, which names options by key, said as the command of these dataclasses
    says it: with their flags (names_of)."""
    try:
        yield
    except OptionError as exc:
        raise exc.named(names_of(*classes)) from None


def read_values(cls: type, values: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """Each value read by its field's declaration; a key that no field has is named (a preset's typo).
    `source`: the preset file the values come from, which errors then name with the key."""
    fields = declared(cls)
    checked = {}
    for key, value in values.items():
        if key not in fields:
            raise UserInputError(source, f"unknown key {key!r}; known keys: {', '.join(fields)}")
        checked[key] = fields[key].item.read(value, source)
    return checked


MAX_PRESET_BYTES = 1 << 20  # a preset is a few lines; anything larger is not one


def small_text_file(path: Path, max_bytes: int, option: str, kind: str) -> str:
    """The text of a small file an option names (a preset, a golden configuration); its problem in one line
    naming the option: missing, unreadable, not a regular file, too large, not UTF-8 (not valid `kind`)."""
    from nccl_bench.results.whole_file import read_small_file

    try:
        return read_small_file(path, max_bytes).decode("utf-8")
    except FileNotFoundError:
        raise UserInputError(option, f"no such file: {path}") from None
    except OSError as exc:
        raise UserInputError(option, f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserInputError(option, f"{path} is not valid {kind}: not UTF-8 text") from None


def toml_table(text: str, path: Path, option: str) -> dict[str, Any]:
    """TOML text as its table; invalid TOML is one line naming the option and the file."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserInputError(option, f"{path} is not valid TOML: {exc}") from None


def load_preset(cls: type, path: Path) -> dict[str, Any]:
    """A TOML preset of `cls` (`cls.PRESET` names the option that gives the file): its keys are field names,
    each value read by its field's declaration; `description` is the preset's own note."""
    name, path = cls.PRESET.name, Path(path)
    data = toml_table(small_text_file(path, MAX_PRESET_BYTES, name, "TOML"), path, name)
    data.pop("description", None)
    return read_values(cls, data, source=str(path))


def build_config(cls: type, given: Mapping[str, Any], preset: Path | None = None) -> Any:
    """An instance of `cls` from its declared fields: defaults < the preset file < `given`. A value that is
    None (or an option given no times) was not given; `given` may hold other keys (the command's other
    options), and each dataclass reads its own. A config with `check_together` has it called."""
    values = {} if preset is None else load_preset(cls, preset)
    flags = {key: given[key] for key in declared(cls) if given.get(key) not in (None, (), [])}
    values.update(read_values(cls, flags))
    if FROM_FLAGS in {each.name for each in dataclasses.fields(cls)}:
        values[FROM_FLAGS] = tuple(flags)
    built = cls(**values)
    if hasattr(built, "check_together"):
        built.check_together()
    return built
