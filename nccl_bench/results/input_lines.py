"""What every reader of an input file shares: the file opened (a gzip-compressed one decompressed as it
is read), its lines read with a bound, and ResultsWarning for what a reader worked around."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import IO, Iterator

from nccl_bench.errors import UserInputError


class ResultsWarning(UserWarning):
    """Something about a results file the reader worked around (a cut last line): data for the
    caller, which decides how to show it (the CLI prints one line to stderr)."""


# No line of a results CSV or an nccl-tests log comes near this; a file with a longer one is not one,
# and reading it would hold the whole line (a multi-GB file without a newline) in memory.
MAX_LINE_CHARS = 1 << 20


# What every gzip stream begins with (RFC 1952): a log or CSV kept as .gz is read as its text.
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC


def open_text(path: Path, **text_options) -> IO[str]:
    """An input file opened as text, told compressed by its content (not its name) and decompressed as read."""
    if is_gzip(path):
        return gzip.open(path, "rt", **text_options)
    return open(path, **text_options)  # noqa: SIM115 - the caller closes it


def open_bytes(path: Path) -> IO[bytes]:
    """open_text's binary twin: the bytes a reader sees, decompressed where the file is gzip."""
    if is_gzip(path):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def decompressed(data: bytes, max_bytes: int) -> bytes:
    """A whole file's bytes as read (gunzipped if gzip), bounded: a small file may not inflate past max_bytes."""
    if not data.startswith(GZIP_MAGIC):
        return data
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        text = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise OSError(0, f"damaged gzip data ({exc})") from None
    if len(text) > max_bytes:
        raise OSError(0, f"more than the {max_bytes:,} bytes it may have once decompressed")
    return text


# What reading a gzip file cut short or damaged raises (gzip.BadGzipFile is an OSError of its own).
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def damaged_gzip(path: Path, option: str, exc: BaseException) -> UserInputError:
    return UserInputError(option, f"{path}: its gzip data is cut short or damaged ({exc})")


def bounded_lines(handle, path: Path, option: str) -> Iterator[str]:
    """The lines of an open text file, each read with a bound: a longer line is refused, naming it."""
    number = 0
    while True:
        try:
            line = handle.readline(MAX_LINE_CHARS)
        except GZIP_ERRORS as exc:
            raise damaged_gzip(path, option, exc) from None
        if not line:
            return
        number += 1
        if len(line) == MAX_LINE_CHARS and not line.endswith("\n"):
            raise UserInputError(option, f"{path} line {number} is longer than {MAX_LINE_CHARS:,} characters; "
                                         "not a results CSV or an nccl-tests log")
        yield line
