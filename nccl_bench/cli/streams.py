"""stdout and stderr that cannot end a command: a closed pipe (`| head`) or a full device is not a
failure of the measurement.

The first write that fails points the stream's descriptor at /dev/null, so nothing later (rich's
console, the interpreter's flush at exit) fails again; the run goes on, writes its files, and ends
with the exit code of what it measured. A closed pipe was the reader's choice and is not mentioned;
any other failure of stdout (no space left, an I/O error) is said in one line on stderr at the end.

That holds where stdout is a view of a run whose files are the product (sweep, doctor, compare with an
export). Where stdout is itself the product (ops, limits, report, help, a comparison with no export), a
lost stdout is a failed command, as for `cat`: one line and EXIT_RUN_FAILED.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO

_stdout_is_product = True


def stdout_is_a_view() -> None:
    """Say that this command's stdout only shows what its files hold: losing it does not fail the command."""
    global _stdout_is_product
    _stdout_is_product = False


def stdout_is_product() -> bool:
    return _stdout_is_product


class GuardedStream:
    """A text stream whose write and flush never raise OSError; `lost` is the first failure, if any."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.lost: OSError | None = None

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._drop(exc)
        return len(text)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._drop(exc)

    def _drop(self, exc: OSError) -> None:
        self.lost = exc
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            self._stream.flush()  # what the failed write left buffered now goes to /dev/null
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the real stream's
        return getattr(self._stream, name)


def guard_output() -> None:
    """Put guarded streams in place of sys.stdout and sys.stderr (once per process)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, GuardedStream):
            setattr(sys, name, GuardedStream(stream))


def lost_stdout() -> str | None:
    """Why the output on stdout was cut short, when it was not a reader closing a pipe."""
    stream = sys.stdout
    try:
        stream.flush()  # what is still buffered is output too: a small table fails only here
    except (OSError, ValueError):
        pass
    lost = getattr(stream, "lost", None) if isinstance(stream, GuardedStream) else None
    if lost is None or lost.errno == errno.EPIPE:
        return None
    if _stdout_is_product:
        return f"stdout: {lost.strerror or lost}; the output was not written"
    return f"stdout: {lost.strerror or lost}; the output from there on was dropped (files are written as usual)"
