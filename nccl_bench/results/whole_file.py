"""Files read or written whole: a file replaced so it holds the old text or the new, never half of one;
a file the user asked for written so, or named when it cannot be; strict JSON; a small file read with a
cap; a JSON file read when it is there and sound, else None.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Iterable, NoReturn

from nccl_bench.errors import WriteFailedError


def strict_json(document: Any, **options: Any) -> str:
    """JSON that every strict reader accepts: a non-finite number (inf, nan) is refused, naming where it is,
    instead of being written as the bare `Infinity` or `NaN` that standard JSON does not have."""
    try:
        return json.dumps(document, allow_nan=False, **options)
    except ValueError:
        where = _non_finite_at(document)
        raise ValueError(f"refusing to write non-standard JSON: {where} is not a finite number") from None


def _non_finite_at(value: Any, where: str = "$") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return where
    children: Any = ()
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, (list, tuple)):
        children = enumerate(value)
    for key, child in children:
        found = _non_finite_at(child, f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]")
        if found:
            return found
    return None


def replace_whole(path: Path, pieces: str | bytes | Iterable[str]) -> None:
    """Write `pieces` (text, or the bytes of a figure) so that `path` holds the old content or the new,
    never half of one: into a hidden file beside it (its name does not end as path's does, so a collector
    watching *.prom skips it), synced, then renamed over path. A path that exists and is no regular file
    (a pipe, a device) or a process's own descriptor is written directly; a link keeps pointing where it
    did, its target replaced. OSError as the system raised it; no temporary file is left."""
    path = Path(path)
    binary = isinstance(pieces, bytes)
    mode, encoding = ("wb", None) if binary else ("w", "utf-8")
    pieces = [pieces] if isinstance(pieces, (str, bytes)) else pieces
    if (path.exists() and not path.is_file()) or _a_descriptor(path):
        with open(path, mode, encoding=encoding) as handle:
            handle.writelines(pieces)
        return
    path = Path(os.path.realpath(path))  # a rename over a link would replace the link, not what it names
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, mode, encoding=encoding) as handle:
            handle.writelines(pieces)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


MAX_LINK_HOPS = 40  # the kernel's own limit on links followed in one lookup (Linux: ELOOP after 40)


def _a_descriptor(path: Path) -> bool:
    """Whether `path` names an open descriptor through /proc or /dev/fd: /dev/stdout is a link to
    /proc/self/fd/1, which is a regular file when stdout is redirected to one, yet renaming a file over
    it would replace the system's /dev/stdout link and leave the process's stdout empty."""
    hop = path
    for _ in range(MAX_LINK_HOPS):
        if not hop.is_symlink():
            return False
        hop = hop.parent / os.readlink(hop)
        if str(hop).startswith(("/proc/", "/dev/fd/")):
            return True
    return True  # a loop of links: opening it fails with the system's own message


def write_text_file(path: Path, pieces: str | bytes | Iterable[str]) -> None:
    """A file the user asked for (an export, a report, a plot's bytes): written whole (replace_whole), or
    WriteFailedError naming it."""
    try:
        replace_whole(path, pieces)
    except OSError as exc:
        raise_write_failed(path, exc)


def append_text(path: Path, text: str) -> None:
    """Text added at the end of a file that others write too (GitHub's step summary), never replacing
    theirs; OSError as the system raised it."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def raise_write_failed(path: Path, exc: OSError) -> NoReturn:
    """A file left half-written is removed (a device such as /dev/full is left alone); one line names it."""
    with contextlib.suppress(OSError):
        if Path(path).is_file():
            Path(path).unlink()
    raise WriteFailedError(path, exc) from None


def read_small_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most max_bytes; OSError names what else it is.

    Checked on the open file, so a FIFO (which would block until a writer comes), a device such as
    /dev/zero (endless) or a file larger than the cap is refused without reading it whole.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise OSError(0, "not a regular file")
        if status.st_size > max_bytes:
            raise OSError(0, f"{status.st_size:,} bytes, more than the {max_bytes:,} it may have")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(0, f"more than the {max_bytes:,} bytes it may have")
    return data


def read_json_or_none(path: Path) -> Any:
    """The JSON document in a regular file, or None when there is none or it cannot be read or parsed:
    for files that only add to what is shown (meta.json, doctor.json, a cached record)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
