"""What every reader of an input file shares: its lines read with a bound, and ResultsWarning for what
a reader worked around."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from nccl_bench.errors import UserInputError


class ResultsWarning(UserWarning):
    """Something about a results file the reader worked around (a cut last line): data for the
    caller, which decides how to show it (the CLI prints one line to stderr)."""


# No line of a results CSV or an nccl-tests log comes near this; a file with a longer one is not one,
# and reading it would hold the whole line (a multi-GB file without a newline) in memory.
MAX_LINE_CHARS = 1 << 20


def bounded_lines(handle, path: Path, option: str) -> Iterator[str]:
    """The lines of an open text file, each read with a bound: a longer line is refused, naming it."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE_CHARS)
        if not line:
            return
        number += 1
        if len(line) == MAX_LINE_CHARS and not line.endswith("\n"):
            raise UserInputError(option, f"{path} line {number} is longer than {MAX_LINE_CHARS:,} characters; "
                                         "not a results CSV or an nccl-tests log")
        yield line
