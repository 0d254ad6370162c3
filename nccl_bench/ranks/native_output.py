"""What native code (NCCL, gloo, torch's TCPStore) writes while a process group starts: held, flushed
at C level, and read into the few lines that say why a start failed."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Callable

from nccl_bench.errors import first_line


class HeldOutput:
    """Hold what native code writes to stdout and stderr meanwhile: passed on, each to its own stream,
    on success; kept in `text` (stdout's, then stderr's) either way, and on failure passed on only in part.

    torch's TCPStore prints a C++ stack for every failed connection attempt while it retries; the
    failure itself is reported as one line, so those frames would only bury it. NCCL writes its WARN
    and INFO lines to stdout (src/debug.cc: ncclDebugFile is stdout unless NCCL_DEBUG_FILE names a
    file), so both descriptors are held. What NCCL said (backend_diagnostics on failure, its diagnostics
    report on success: results/nccl_diag.py) is picked out of `text` by the caller.
    """

    FDS = (1, 2)

    def __init__(self, fds: tuple[int, ...] = FDS, passed_on_failure: Callable[[str], str] | None = None):
        """fds: the descriptors held; passed_on_failure: what of each one's text is still passed on when
        the block fails (None: nothing)."""
        self.text = ""
        self.fds = fds
        self.passed_on_failure = passed_on_failure
        self._saved: dict[int, int] = {}  # the terminal's descriptors while held

    def release(self) -> None:
        """Give stdout and stderr back now, from any thread (a watchdog about to report and end the
        process); what was held stays unread."""
        for fd, saved in dict(self._saved).items():
            with contextlib.suppress(OSError):
                os.dup2(saved, fd)

    def __enter__(self) -> HeldOutput:
        import tempfile

        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = {fd: os.dup(fd) for fd in self.fds}
        self._held = {fd: tempfile.TemporaryFile() for fd in self.fds}
        for fd, held in self._held.items():
            os.dup2(held.fileno(), fd)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _flush_c_stdio()  # NCCL fwrites to C's stdout, fully buffered when it is not a terminal
        written = {}
        saved, self._saved = self._saved, {}
        for fd in self.fds:
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            with self._held[fd] as held:
                held.seek(0)
                written[fd] = held.read()
        self.text = "\n".join(raw.decode("utf-8", "replace") for raw in written.values())
        if exc_type is None:
            for fd, raw in written.items():
                _pass_on(fd, raw)
        else:
            for fd, raw in written.items():
                kept = self.passed_on_failure(raw.decode("utf-8", "replace")) if self.passed_on_failure else ""
                with contextlib.suppress(OSError):
                    _pass_on(fd, kept.encode())


def _pass_on(fd: int, raw: bytes) -> None:
    """What was held, written to the stream it was written to (stdout or stderr)."""
    if raw and fd == 1:
        os.write(1, raw)
    elif raw:
        os.write(2, raw)


def _flush_c_stdio() -> None:
    """Flush every C stdio stream (fflush(NULL)): NCCL's WARN lines are fwrite()n to C's stdout
    (src/debug.cc) and never flushed, and glibc buffers a stdout that is a pipe or a file whole, so
    without this they would land after the held descriptors are given back (or never, at os._exit)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


# What NCCL and torch's NCCL group say when a communicator cannot start, kept when it fails:
# NCCL's own "NCCL WARN" lines (NCCL_DEBUG=WARN or INFO) and torch's "Last error:" line with the
# line after it (the error NCCL gave; ProcessGroupNCCL puts it there).
_NCCL_WARN = re.compile(r"\bNCCL WARN\b")
LAST_ERROR = "Last error:"
MAX_DIAGNOSTICS = 20  # lines: the rest of a long NCCL_DEBUG=INFO log stays out of the answer


def backend_diagnostics(text: str) -> tuple[str, ...]:
    """NCCL's WARN lines and torch's last error from what was written during the set-up, in order,
    each once, without control characters (they reach a terminal)."""
    lines = [line.strip() for line in text.splitlines()]
    kept: list[str] = []
    for index, line in enumerate(lines):
        if _NCCL_WARN.search(line):
            kept.append(line)
        elif LAST_ERROR in line:
            after = line.split(LAST_ERROR, 1)[1].strip()
            follow = lines[index + 1] if not after and index + 1 < len(lines) else ""
            kept.append(f"{LAST_ERROR} {after or follow}".rstrip())
    unique = list(dict.fromkeys(_printable(line) for line in kept if line))
    return tuple(unique[:MAX_DIAGNOSTICS])


# A line c10 logging writes ([W1128 14:12:51.479 socket.cpp:469] ..., with torch's "[rank0]:" before it
# where the rank is known: c10/util/Logging.cpp), and the C++ stack lines an exception's text carries.
_NATIVE_LOG_LINE = re.compile(r"^(?:\[rank\d+\]:)?\[[IWEF]\d{4} \d\d:\d\d:\d\d|^frame #\d+: |^Exception raised from ")


def without_native_logs(text: str) -> str:
    """`text` without the lines torch's C++ logging wrote: what Python wrote meanwhile (a note) is kept."""
    return "".join(line for line in text.splitlines(keepends=True) if not _NATIVE_LOG_LINE.match(line))


def _printable(line: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in line)


_SOURCE_LOCATION = re.compile(r"^\[[^\]]*\.(?:cc|cpp|cu|h|hpp):\d+\]\s*")


def backend_error_text(exc: BaseException) -> str:
    """What a gloo/NCCL error says happened, without its source location and generic advice."""
    text = first_line(exc)
    while _SOURCE_LOCATION.match(text):
        text = _SOURCE_LOCATION.sub("", text, count=1)
    return text.split(". ", 1)[0].rstrip(". ") or type(exc).__name__
