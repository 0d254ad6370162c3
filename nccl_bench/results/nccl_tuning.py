"""NCCL's own account of the algorithm and protocol it chose, read from its debug log (pure: text in).

With NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=TUNING, rank 0 of each communicator logs one line per
collective it enqueues (src/enqueue.cc). Three formats, by NCCL version:

- 2.20 to 2.22: ``INFO(NCCL_TUNING, "%ld Bytes -> Algo %d proto %d time %f", ...)``: no collective
  name, algorithm and protocol as numbers;
- 2.23: ``"%s: %ld Bytes -> Algo %d proto %d time %f"``: the collective's name first;
- 2.24 and later: ``"%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"``: names
  (ncclAlgoToString: TREE, RING, ...; ncclProtoToString: LL, LL128, SIMPLE).

Numbers are NCCL's own (src/include/nccl_common.h): NCCL_ALGO_TREE 0 ... NCCL_ALGO_PAT 6,
NCCL_PROTO_LL 0, LL128 1, SIMPLE 2. Before 2.20 the line was commented out (TRACE only).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from nccl_bench.units.op_table import OPS

ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
# Our op -> the name ncclFuncToString gives the collective NCCL runs for it; ops torch builds from
# point-to-point sends have no tuning line.
NCCL_FUNCTIONS = {name: c.nccl_function for name, c in OPS.items() if c.nccl_function is not None}

_LINE = re.compile(
    r"NCCL INFO (?:(?P<func>[A-Za-z]+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
)


@dataclass(frozen=True)
class TuningLine:
    """One collective as NCCL logged it: its name (None before 2.23), bytes, algorithm and protocol."""

    func: str | None
    nbytes: int
    algo: str  # TREE, RING, ... (a number of an older NCCL read as its name)
    proto: str  # LL, LL128, SIMPLE


def parse_line(line: str) -> TuningLine | None:
    """A tuning line of any of the three formats, or None for any other line."""
    match = _LINE.search(line)
    if match is None:
        return None
    algo = _name(match["algo"], ALGORITHMS)
    proto = _name(match["proto"], PROTOCOLS)
    return TuningLine(match["func"], int(match["bytes"]), algo, proto)


def _name(text: str, names: tuple[str, ...]) -> str:
    """A number as NCCL's name for it (an unknown number stays a number); a name in capitals."""
    if text.isdigit():
        return names[int(text)] if int(text) < len(names) else text
    return text.upper()


def chosen(lines: Iterable[str], op: str) -> tuple[str, str] | None:
    """The (algorithm, protocol) NCCL used most often for `op` in these lines, or None.

    The lines of one point hold the measured op many times, and the run's own bookkeeping
    collectives (small all_reduce and all_gather calls) once or twice, so the most frequent choice
    among the op's own collective is the point's. Lines without a name (2.20 to 2.22) count for any op.
    """
    func = NCCL_FUNCTIONS.get(op)
    if func is None:
        return None
    seen = Counter()
    for line in lines:
        parsed = parse_line(line)
        if parsed is not None and parsed.func in (func, None):
            seen[(parsed.nbytes, parsed.algo, parsed.proto)] += 1
    if not seen:
        return None
    (_nbytes, algo, proto), _count = seen.most_common(1)[0]
    return algo, proto
