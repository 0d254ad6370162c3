"""--nccl-env's grammar: NAME=V1[,V2...] parsed once, the variants (the product of the lists), their labels.

NCCL reads its variables once per process, so each variant is a fresh set of ranks; the label is
what a row's `variant` column holds ("NCCL_ALGO=Ring NCCL_PROTO=LL") and what a shell would take.
Only NCCL_* names are accepted, and values are names (letters, digits and _ . : ^ -): what NCCL's
own values are (Ring, LL128, ^NVLS, 4), and nothing a shell or a CSV cell would read as more.
"""

from __future__ import annotations

import itertools
import re
from typing import Iterable

NAME = re.compile(r"NCCL_[A-Z0-9_]+")
VALUE = re.compile(r"[A-Za-z0-9_.:^-]+")
MAX_VARIANTS = 64  # each variant is a whole sweep in fresh ranks: more is a job for a shell loop

Assignment = tuple[str, tuple[str, ...]]  # a name and its values, in the order given
Variant = tuple[tuple[str, str], ...]  # one value per name, in the order the names were given


def parse_assignment(text: str) -> Assignment:
    """'NCCL_ALGO=Ring,Tree' -> ('NCCL_ALGO', ('Ring', 'Tree')); ValueError says what is wrong."""
    name, equals, values = str(text).partition("=")
    name = name.strip()
    if not equals:
        raise ValueError(f"{text!r} is not NAME=VALUE[,VALUE...]")
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not an NCCL variable (NCCL_ and capitals, digits or _)")
    parts = tuple(part.strip() for part in values.split(","))
    for part in parts:
        if not VALUE.fullmatch(part):
            raise ValueError(f"{name}: {part!r} is not a value (letters, digits and _ . : ^ -)")
    if len(set(parts)) != len(parts):
        raise ValueError(f"{name}: a value is given twice")
    return name, parts


def parse_assignments(texts: Iterable[str]) -> tuple[Assignment, ...]:
    """Every --nccl-env given, each name once, and not more variants than MAX_VARIANTS."""
    parsed = tuple(parse_assignment(text) for text in texts)
    names = [name for name, _ in parsed]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} given twice; list its values once, comma-separated")
    count = len(variants(parsed))
    if count > MAX_VARIANTS:
        raise ValueError(f"{count} variants; a run takes at most {MAX_VARIANTS} (loop in the shell for more)")
    return parsed


def variants(assignments: Iterable[Assignment]) -> list[Variant]:
    """The product of the lists, the first name varying slowest; [()] without any."""
    assignments = list(assignments)
    names = [name for name, _ in assignments]
    return [tuple(zip(names, values, strict=True)) for values in itertools.product(*(v for _, v in assignments))]


def label(variant: Variant) -> str:
    """'NCCL_ALGO=Ring NCCL_PROTO=LL': the row's variant column; '' for the run without --nccl-env."""
    return " ".join(f"{name}={value}" for name, value in variant)


def as_text(assignment: Assignment) -> str:
    """The assignment as it is given on the command line (meta.json, presets)."""
    name, values = assignment
    return f"{name}={','.join(values)}"


def shell_loop(assignments: Iterable[Assignment], command: str) -> str:
    """The shell loop that runs each variant under a launcher (which this tool cannot restart)."""
    assignments = list(assignments)
    loops = " ".join(f"for v{i} in {' '.join(values)}; do" for i, (_, values) in enumerate(assignments))
    env = " ".join(f"{name}=$v{i}" for i, (name, _) in enumerate(assignments))
    return f"{loops} {env} {command}; " + " ".join(["done;"] * len(assignments))
