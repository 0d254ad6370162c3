"""--nccl-trace on a rank: NCCL's tuning lines into a file of this rank's own, read back point by point.

NCCL reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE once, when its first communicator is
made, so they are set before the process group exists. Its debug file is line-buffered
(src/debug.cc), so what a point's ops logged is on disk when the point ends. Rank 0 of each
communicator logs (src/enqueue.cc): the world's rank 0, and with --split each group's first rank.
What the lines say is read by results/nccl_tuning.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import MutableMapping

TRACE_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}
DEBUG_FILE_ENV = "NCCL_DEBUG_FILE"
TRACE_VARIABLES = (*TRACE_ENV, DEBUG_FILE_ENV)  # what --nccl-trace sets: never --nccl-env's too
# A point of many small ops logs one short line per op (~100 B; a GPU sweep's small sizes run 10^5 ops
# per sample): the last MiB of a point's lines, thousands of its timed ops, is what is read.
MAX_READ_BYTES = 2**20


class TuningTrace:
    """This rank's NCCL debug file, read from a mark on."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0

    @classmethod
    def start(cls, rank: int, environ: MutableMapping[str, str] = os.environ) -> "TuningTrace":
        """Point NCCL's debug output of this process at a new file of its own (before any communicator)."""
        folder = Path(tempfile.mkdtemp(prefix="nccl-bench-trace-"))
        path = folder / f"nccl-debug.rank{rank}.log"
        environ.update(TRACE_ENV)
        environ[DEBUG_FILE_ENV] = str(path)
        return cls(path)

    def mark(self) -> None:
        """What NCCL logs from now on belongs to the point that starts."""
        self._offset = self._size()

    def lines_since_mark(self) -> list[str]:
        """The lines logged since the mark (the last MAX_READ_BYTES of them, whole lines only)."""
        end = self._size()
        start = max(self._offset, end - MAX_READ_BYTES)
        try:
            with open(self.path, "rb") as handle:
                handle.seek(start)
                data = handle.read(end - start)
        except OSError:
            return []
        skipped = start > self._offset  # began inside a line: it is left out
        self._offset = end
        lines = data.decode("utf-8", errors="replace").splitlines()
        return lines[1:] if skipped else lines

    def close(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.path.parent)

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0
