"""Byte-size grammar ("1K", "64M", "1G" are powers of 1024, as nccl-tests) and size sequences."""

from __future__ import annotations

import itertools
import math
import re
from typing import Iterator, NamedTuple

from nccl_bench.errors import UserInputError

_SUFFIX_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}
_SIZE_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, option: str = "size") -> int:
    """Parse '8', '1K', '64M', '1G' (also '1KiB', '1KB': still 1024-based, as nccl-tests) into bytes."""
    if isinstance(text, bool):
        raise UserInputError(option, f"expected a byte size like 1K or 64M, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_PATTERN.match(str(text))
        if not match:
            raise UserInputError(option, f"expected a byte size like 8, 1K, 64M or 1G, got {text!r}")
        number, suffix = match.groups()
        scaled = float(number) * 1024 ** _SUFFIX_POWER[suffix.upper()]
        if scaled != int(scaled):
            raise UserInputError(option, f"{text!r} is not a whole number of bytes")
        value = int(scaled)
    if value <= 0:
        raise UserInputError(option, f"a size must be at least 1 byte, got {text!r}")
    return value


def format_size(size_bytes: int) -> str:
    """Shortest exact label: 1024 -> '1K', 1536 -> '1536', 1073741824 -> '1G'."""
    for suffix in ("T", "G", "M", "K"):
        unit = 1024 ** _SUFFIX_POWER[suffix]
        if size_bytes >= unit and size_bytes % unit == 0:
            return f"{size_bytes // unit}{suffix}"
    return str(size_bytes)


_DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB")


def decimal_size(size_bytes: int) -> str:
    """A size as people read it, in powers of 1000 as GB/s counts bytes: 31502336 -> '31.5 MB', 512 -> '512 B'."""
    power = 0
    while power < len(_DECIMAL_UNITS) - 1 and size_bytes >= 1000 ** (power + 1):
        power += 1
    shown = float(f"{size_bytes / 1000**power:.3g}")
    if shown >= 1000 and power < len(_DECIMAL_UNITS) - 1:  # rounded up into the next unit: 999999 -> 1 MB
        power, shown = power + 1, 1.0
    return f"{size_bytes} B" if power == 0 else f"{shown:g} {_DECIMAL_UNITS[power]}"


class RangeNames(NamedTuple):
    """How an error names a size range's ends and steps: the options that set them, as the caller
    (which knows the options) passes them; these defaults are plain words."""

    low: str = "smallest size"
    high: str = "largest size"
    factor: str = "step factor"
    step: str = "step"


PLAIN = RangeNames()


def geometric_sizes(min_bytes: int, max_bytes: int, factor: float, names: RangeNames = PLAIN) -> list[int]:
    """min, min*f, min*f^2, ... up to max inclusive (nccl-tests -b/-e/-f)."""
    return list(_geometric(min_bytes, max_bytes, factor, names))


def _geometric(min_bytes: int, max_bytes: int, factor: float, names: RangeNames) -> Iterator[int]:
    """The distinct sizes of a geometric sequence, one loop turn per size.

    A factor barely above 1 repeats the same whole byte count for many steps; the loop jumps
    straight to the step where the size grows, so its work is bounded by the sizes it yields.
    """
    if factor <= 1:
        raise UserInputError(names.factor, f"must be greater than 1, got {factor:g}")
    check_range(min_bytes, max_bytes, names)
    step, last = 0, None
    while True:
        size = int(math.floor(min_bytes * factor**step + 1e-9))
        if size > max_bytes:
            return
        if size != last:
            yield size
            last = size
        jump = math.ceil(math.log((size + 1) / min_bytes) / math.log(factor) - 1e-12)
        step = max(step + 1, jump)


def linear_sizes(min_bytes: int, max_bytes: int, step_bytes: int, names: RangeNames = PLAIN) -> list[int]:
    """min, min+i, min+2i, ... up to max inclusive (nccl-tests -i)."""
    if step_bytes <= 0:
        raise UserInputError(names.step, f"must be at least 1 byte, got {step_bytes}")
    check_range(min_bytes, max_bytes, names)
    return list(range(min_bytes, max_bytes + 1, step_bytes))


def count_sizes(min_bytes: int, max_bytes: int, factor: float | None = None, step_bytes: int | None = None,
                at_most: int | None = None, names: RangeNames = PLAIN) -> int:
    """How many sizes -b/-e with -f (geometric) or -i (linear) make, without building them.

    Linear counts are arithmetic; geometric ones walk the distinct sizes, stopping one past
    `at_most`, so a check against a cap costs no more than the cap.
    """
    if step_bytes is not None:
        if step_bytes <= 0:
            raise UserInputError(names.step, f"must be at least 1 byte, got {step_bytes}")
        check_range(min_bytes, max_bytes, names)
        return (max_bytes - min_bytes) // step_bytes + 1
    sizes = _geometric(min_bytes, max_bytes, 2.0 if factor is None else factor, names)
    return sum(1 for _ in itertools.islice(sizes, None if at_most is None else at_most + 1))


def check_range(min_bytes: int, max_bytes: int, names: RangeNames = PLAIN) -> None:
    """Refuse a size range whose low end is above its high end."""
    if min_bytes > max_bytes:
        raise UserInputError(names.low, f"{format_size(min_bytes)} is above {names.high} {format_size(max_bytes)}")
