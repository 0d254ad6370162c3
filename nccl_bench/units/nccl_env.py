"""--nccl-env's grammar: NAME=VALUE taken whole, one variant per value, the variants (the product over
names), their labels.

NCCL reads its variables once per process, so each variant is a fresh set of ranks; the label is
what a row's `variant` column holds ("NCCL_ALGO=Ring NCCL_PROTO=LL").

A value is passed to NCCL exactly as given, because NCCL's own grammar uses every separator a tool
might want for itself: `,` separates the items of one list (NCCL_ALGO=Ring,Tree is "Ring or Tree",
NCCL_SOCKET_IFNAME=^docker0,lo "neither docker0 nor lo"), `;` separates per-collective settings
(NCCL_ALGO=allreduce:ring;allgather:^tree, src/graph/tuning.cc), a leading `^` excludes and a
leading `=` asks for an exact name (NCCL_SOCKET_IFNAME==eth0, NCCL_IB_HCA==mlx5_0:1,
src/misc/socket.cc and src/transport/net_ib.cc), and paths name files (NCCL_TOPO_FILE). So several
variants of one name are given by repeating the option (`--nccl-env NCCL_ALGO=Ring --nccl-env
NCCL_ALGO=Tree`), which no value can be confused with. Only NCCL_* names are accepted; a value is any
printable text without whitespace (a label separates its settings with spaces).
"""

from __future__ import annotations

import itertools
import re
import shlex
from typing import Iterable

NAME = re.compile(r"NCCL_[A-Z0-9_]+")
VALUE = re.compile(r"[A-Za-z0-9_.:^;=,/%+@-]+")
VALUE_CHARACTERS = "letters, digits and _ . : ^ ; = , / % + @ -"
MAX_VARIANTS = 64  # each variant is a whole sweep in fresh ranks: more is a job for a shell loop

Assignment = tuple[str, tuple[str, ...]]  # a name and its values (one variant each), in the order given
Variant = tuple[tuple[str, str], ...]  # one value per name, in the order the names were given


def parse_setting(text: str) -> tuple[str, str]:
    """'NCCL_ALGO=allreduce:ring;allgather:^tree' -> ('NCCL_ALGO', 'allreduce:ring;allgather:^tree'): the
    value whole, as NCCL will read it; ValueError says what is wrong."""
    name, equals, value = str(text).partition("=")
    name = name.strip()
    if not equals:
        raise ValueError(f"{text!r} is not NAME=VALUE")
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not an NCCL variable (NCCL_ and capitals, digits or _)")
    if not value:
        raise ValueError(f"{name}: no value given (NAME=VALUE)")
    if not VALUE.fullmatch(value):
        raise ValueError(f"{name}: {value!r} is not a value NCCL reads ({VALUE_CHARACTERS})")
    return name, value


def parse_assignments(texts: Iterable[str]) -> tuple[Assignment, ...]:
    """Every --nccl-env given: the values of each name in the order given (a repeated name is several
    variants of it), each value once, and not more variants than MAX_VARIANTS."""
    grouped: dict[str, list[str]] = {}
    for text in texts:
        name, value = parse_setting(text)
        problem = choice_problem(name, value)
        if problem is not None:
            raise ValueError(f"{name}={value}: {problem}")
        values = grouped.setdefault(name, [])
        if value in values:
            raise ValueError(f"{name}={value} is given twice")
        values.append(value)
    parsed = tuple((name, tuple(values)) for name, values in grouped.items())
    count = len(variants(parsed))
    if count > MAX_VARIANTS:
        raise ValueError(f"{count} variants; a run takes at most {MAX_VARIANTS} (loop in the shell for more)")
    return parsed


def variants(assignments: Iterable[Assignment]) -> list[Variant]:
    """The product over names, the first name varying slowest; [()] without any."""
    assignments = list(assignments)
    names = [name for name, _ in assignments]
    return [tuple(zip(names, values, strict=True)) for values in itertools.product(*(v for _, v in assignments))]


def label(variant: Variant) -> str:
    """'NCCL_ALGO=Ring NCCL_PROTO=LL': the row's variant column; '' for the run without --nccl-env."""
    return " ".join(f"{name}={value}" for name, value in variant)


def as_texts(assignment: Assignment) -> tuple[str, ...]:
    """The assignment as the command line gives it (meta.json, presets): one NAME=VALUE per variant."""
    name, values = assignment
    return tuple(f"{name}={value}" for value in values)


def shell_loop(assignments: Iterable[Assignment], command: str) -> str:
    """The shell loop that runs each variant under a launcher (which this tool cannot restart); every
    value quoted for the shell, as NCCL's `;` and `^` would otherwise be read by it."""
    assignments = list(assignments)
    loops = " ".join(f"for v{i} in {' '.join(shlex.quote(v) for v in values)}; do"
                     for i, (_, values) in enumerate(assignments))
    env = " ".join(f'{name}="$v{i}"' for i, (name, _) in enumerate(assignments))
    return f"{loops} {env} {command}; " + " ".join(["done;"] * len(assignments))


# NCCL's names (src/init.cc: ncclFuncStr, ncclAlgoStr, ncclProtoStr), matched without regard to case.
NCCL_FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
NCCL_ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")


def enabled_for(value: str, function: str, elements: tuple[str, ...] = NCCL_ALGORITHMS) -> frozenset[str] | None:
    """What NCCL_ALGO (or NCCL_PROTO, with elements=NCCL_PROTOCOLS) leaves `function` ("AllReduce"), as
    NCCL reads it (read_choice). None for a value NCCL refuses (it then fails the communicator) or an
    empty one (NCCL's own choice)."""
    if not value:
        return None
    try:
        chosen = read_choice(value, elements)
    except ValueError:
        return None
    return chosen.get(function.lower(), chosen.get(""))


def read_choice(value: str, elements: tuple[str, ...] = NCCL_ALGORITHMS) -> dict[str, frozenset[str]]:
    """NCCL_ALGO (or NCCL_PROTO, with elements=NCCL_PROTOCOLS) as NCCL reads it (parseList and its callers
    in src/graph/tuning.cc): `;` separates settings, each `[func:]list`, where only the first may lack a
    function and then applies to every one; a later setting replaces an earlier one for its function; a
    list is `,`-separated names, matched without regard to case (strcasecmp), and a leading `^` enables
    everything but its items. Returns function (lower case; "" for every function) -> the enabled names;
    ValueError names the first part NCCL does not know, and what it knows there."""
    names = {name.lower(): name for name in elements}
    functions = {name.lower(): name for name in NCCL_FUNCTIONS}
    chosen: dict[str, frozenset[str]] = {}
    for index, setting in enumerate(part for part in value.split(";") if part):
        prefix, colon, items = setting.partition(":")
        if not colon:
            prefix, items = "", setting
            if index:
                raise ValueError(f"{setting!r} names no collective; only the first setting may apply to every "
                                 f"one (write FUNCTION:{setting}, FUNCTION one of {', '.join(NCCL_FUNCTIONS)})")
        elif prefix.lower() not in functions:
            raise ValueError(f"{prefix!r} is not a collective NCCL knows ({', '.join(NCCL_FUNCTIONS)})")
        exclude = items.startswith("^")
        listed = [item for item in items.removeprefix("^").split(",") if item]
        unknown = [item for item in listed if item.lower() not in names]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a name NCCL knows ({', '.join(elements)}, in any case)")
        picked = frozenset(names[item.lower()] for item in listed)
        enabled = frozenset(elements) - picked if exclude else picked
        if not prefix:
            chosen = {function: enabled for function in [""] + [name.lower() for name in NCCL_FUNCTIONS]}
        else:
            chosen[prefix.lower()] = enabled
    return chosen


CHOICES = {"NCCL_ALGO": NCCL_ALGORITHMS, "NCCL_PROTO": NCCL_PROTOCOLS}  # the variables read_choice reads


def choice_problem(name: str, value: str) -> str | None:
    """What is wrong with NCCL_ALGO's or NCCL_PROTO's value, said before a run: NCCL ignores or refuses
    a name it does not know (by version and rank count), so the rows would carry a label that did not
    happen. None for any other variable, an empty value, or a value NCCL reads."""
    if name not in CHOICES or not value.strip():
        return None
    try:
        read_choice(value.strip(), CHOICES[name])
    except ValueError as exc:
        return str(exc)
    return None
