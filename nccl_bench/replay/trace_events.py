"""The events of a profiler trace (Chrome trace format, as PyTorch's Kineto writes it), read as a stream.

A trace is either an object, `{"traceEvents": [...], "distributedInfo": {...}, ...}`, or a bare array of
events (the format's "JSON Array Format"). It may be gzip-compressed, told by its content, not its name.
One rank's trace of a long job runs to gigabytes, so it is never loaded whole: the text is read in
chunks and each event decoded on its own (the json module's raw_decode, which scans at C speed), so
memory holds one chunk and one event, whatever the file's size. The top level's other keys (metadata
such as distributedInfo, small in every trace) are decoded whole and handed over when the stream ends.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

from nccl_bench.errors import UserInputError
from nccl_bench.results.input_lines import GZIP_ERRORS, GZIP_MAGIC, open_bytes

# Text decoded per read: large enough that a read's overhead vanishes, small beside any memory.
CHUNK_CHARS = 1 << 20
# No event of a real trace comes near this (the largest seen carry a call stack of a few KB); a file
# with a longer one is not a trace, and reading on would hold all of it.
MAX_EVENT_CHARS = 64 << 20

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")


class TraceError(UserInputError):
    """A trace file that cannot be read as one: cut short, not JSON, not a trace, or without collectives.
    One line naming the file; the CLI answers it as every bad input (exit 2)."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(str(path), problem)
        self.path = path


class TraceStream:
    """The events of one trace file, in file order, each a dict, read as they are iterated.

    `metadata` holds the top level's other keys once the iteration has ended (distributedInfo may
    follow traceEvents in the file). Iterating again reads the file again; a path that is no regular
    file (a FIFO, a shell's `<(...)`) can be read only once, so its bytes are kept in a temporary file
    as they are first read, and read again from there.
    """

    def __init__(self, path: Path):
        self.path = path
        self.metadata: dict[str, Any] = {}
        self._kept: IO[bytes] | None = None  # a stream's bytes, once read

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.metadata = {}
        try:
            with self._open() as raw, io.TextIOWrapper(raw, encoding="utf-8") as text:
                yield from _Cursor(text, self.path).trace(self.metadata)
        except RecursionError:  # raw_decode recurses once per level of nesting
            raise TraceError(self.path, "not a trace: its JSON nests deeper than any trace's events") from None
        except GZIP_ERRORS as exc:
            raise TraceError(self.path, f"its gzip data is cut short or damaged ({type(exc).__name__})") from None
        except UnicodeDecodeError:
            raise TraceError(self.path, "not a trace: its text is not UTF-8") from None
        except OSError as exc:
            raise TraceError(self.path, exc.strerror or type(exc).__name__) from None


    def _open(self) -> IO[bytes]:
        """The file's bytes, decompressed where they are gzip (told by their first bytes)."""
        if self._kept is None and not is_stream(self.path):
            return open_bytes(self.path)
        if self._kept is None:
            self._kept = _read_once(self.path)
        raw = open(os.dup(self._kept.fileno()), "rb")  # noqa: SIM115 - the caller closes it; the copy stays open
        raw.seek(0)
        if raw.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
            raw.seek(0)
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        raw.seek(0)
        return raw


def is_stream(path: Path) -> bool:
    """Neither a regular file nor a missing one (whose open says so): a FIFO, a pipe, a character device."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _read_once(path: Path) -> IO[bytes]:
    """A stream's bytes, read to its end into a temporary file. Opened without waiting for a writer
    (a FIFO nobody writes to would hold the open forever): with no writer its read ends at once, and
    no bytes is a stream nothing was written to."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(descriptor, True)
    kept = tempfile.TemporaryFile()  # noqa: SIM115 - held by the TraceStream
    with open(descriptor, "rb") as source:
        shutil.copyfileobj(source, kept, CHUNK_CHARS)
    kept.flush()  # read again through another descriptor, which sees only what reached the file
    if kept.tell() == 0:
        kept.close()
        raise OSError(0, "nothing to read: no program has written to it (a pipe or FIFO is read as it is written)")
    return kept


def stream_trace(path: Path | str) -> TraceStream:
    """The events of the trace at `path`, read lazily (see TraceStream)."""
    return TraceStream(Path(path))


class _Cursor:
    """A position in the file's text, with as much of it buffered as the value under the cursor needs."""

    def __init__(self, text: io.TextIOBase, path: Path):
        self.text = text
        self.path = path
        self.buffer = ""
        self.pos = 0
        self.at_eof = False
        self.decoder = json.JSONDecoder()

    def trace(self, metadata: dict[str, Any]) -> Iterator[dict[str, Any]]:
        opening = self._next_char()
        if opening == "[":
            yield from self._events()
        elif opening == "{":
            yield from self._top_object(metadata)
        else:
            raise self._error("not a trace: it is neither a JSON object with traceEvents nor an array of events")
        if self._next_char() != "":
            raise self._error("not a trace: text follows the end of its JSON value")

    def _top_object(self, metadata: dict[str, Any]) -> Iterator[dict[str, Any]]:
        found_events = False
        if self._peek() == "}":
            self.pos += 1
        else:
            while True:
                key = self._value()
                if not isinstance(key, str) or self._next_char() != ":":
                    raise self._error("not JSON: an object key without its value")
                if key == "traceEvents" and self._peek() == "[":
                    self.pos += 1
                    found_events = True
                    yield from self._events()
                else:
                    metadata[key] = self._value()
                separator = self._next_char()
                if separator == "}":
                    break
                if separator != ",":
                    raise self._cut_or_malformed("the top-level object")
        if not found_events:
            raise self._error("not a trace: its JSON object has no traceEvents array")

    def _events(self) -> Iterator[dict[str, Any]]:
        """The array's elements, the cursor just past its '['; each must be an object.

        The hot loop of the reader: one C-level scan per event and one regex match per separator; the
        general path (_value, _next_char) only where a chunk ends inside an event or a separator.
        """
        if self._peek() == "]":
            self.pos += 1
            return
        scan, separator = self.decoder.scan_once, _SEPARATOR.match
        while True:
            buffer, pos = self.buffer, self.pos
            try:
                event, end = scan(buffer, pos)
            except (StopIteration, json.JSONDecodeError):  # cut by the chunk's end, or malformed
                event = self._value("an event")
                end = self.pos
            if not isinstance(event, dict):
                raise self._error("not a trace: an element of its events array is not a JSON object")
            yield event
            found = separator(buffer, end) if buffer is self.buffer else None
            if found is not None and found.end() < len(buffer):
                self.pos = found.end()
                if found[1] == "]":
                    return
                continue
            self.pos = end if buffer is self.buffer else self.pos
            closing = self._next_char()
            if closing == "]":
                return
            if closing != ",":
                raise self._cut_or_malformed("the events array")

    def _value(self, what: str = "a value") -> Any:
        """The JSON value at the cursor, reading on until it is whole (or the file ends)."""
        self._skip_whitespace()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if self.at_eof:
                    raise self._cut_or_malformed(what, exc) from None
                self._read_more()
                continue
            # A number (or a literal) that reaches the buffer's end may go on in the next chunk.
            if end == len(self.buffer) and not self.at_eof:
                self._read_more()
                continue
            self.pos = end
            return value

    def _peek(self) -> str:
        self._skip_whitespace()
        return self.buffer[self.pos] if self.pos < len(self.buffer) else ""

    def _next_char(self) -> str:
        """The next character that is not whitespace, consumed; '' at the end of the file."""
        char = self._peek()
        self.pos += len(char)
        return char

    def _skip_whitespace(self) -> None:
        while True:
            self.pos = _WHITESPACE.match(self.buffer, self.pos).end()
            if self.pos < len(self.buffer) or self.at_eof:
                return
            self._read_more()

    def _read_more(self) -> None:
        """Append the next chunk (dropping what the cursor has passed); a value longer than
        MAX_EVENT_CHARS is refused rather than held."""
        pending = len(self.buffer) - self.pos
        if pending > MAX_EVENT_CHARS:
            raise self._error(f"not a trace: one value runs past {MAX_EVENT_CHARS:,} characters")
        chunk = self.text.read(max(CHUNK_CHARS, pending))
        self.buffer = self.buffer[self.pos:] + chunk
        self.pos = 0
        self.at_eof = not chunk

    def _cut_or_malformed(self, where: str, exc: json.JSONDecodeError | None = None) -> TraceError:
        """Text that stops where more must follow is a file cut short (a copy or a job killed while
        writing); anything else is malformed."""
        text_end = len(self.buffer.rstrip())
        if exc is None:
            cut = self.pos >= text_end
        else:
            cut = exc.pos >= text_end or exc.msg.startswith("Unterminated string")
        if cut:
            return self._error(f"cut short: the file ends inside {where}")
        detail = "" if exc is None else f" ({exc.msg})"
        return self._error(f"not JSON: {where} is malformed{detail}")

    def _error(self, problem: str) -> TraceError:
        return TraceError(self.path, problem)
