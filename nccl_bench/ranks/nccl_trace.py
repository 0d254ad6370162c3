"""--nccl-trace on a rank: NCCL's tuning lines into a file of this rank's own, read back point by point.

NCCL reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE once, when its first communicator is
made, so they are set before the process group exists. Its debug file is line-buffered
(src/debug.cc), so what a point's ops logged is on disk when the point ends. Rank 0 of each
communicator logs (src/enqueue.cc): the world's rank 0, and with --split each group's first rank.
What the lines say is read by results/nccl_tuning.py.

The user's own debug settings are kept where the trace can work with them (NCCL_DEBUG=INFO or
TRACE, NCCL_DEBUG_SUBSYS including TUNING) and refused before anything runs where it cannot (a lower
NCCL_DEBUG, subsystems without TUNING, an NCCL_DEBUG_FILE of the user's): the trace never changes
them behind the user's back. Rank 0's file, which holds every line NCCL logged (its WARN lines too),
is moved into the run folder when the run ends, so the path meta.json records is a file that exists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping, MutableMapping

TRACE_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}
# NCCL_DEBUG levels that log INFO lines (src/debug.cc: NONE, VERSION, WARN, INFO, ABORT, TRACE in order).
LOGS_INFO = ("INFO", "ABORT", "TRACE")
# NCCL's default subsystems (src/debug.cc: INIT, BOOTSTRAP, ENV) and the trace's: a user's NCCL_DEBUG=INFO
# without NCCL_DEBUG_SUBSYS still logs what it would have.
DEFAULT_SUBSYS_AND_TUNING = "INIT,BOOTSTRAP,ENV,TUNING"
KEPT_NAME = "nccl-debug.rank{rank}.log"  # rank 0's log, in the run folder
DEBUG_FILE_ENV = "NCCL_DEBUG_FILE"
TRACE_VARIABLES = (*TRACE_ENV, DEBUG_FILE_ENV)  # what --nccl-trace sets: never --nccl-env's too
# A point of many small ops logs one short line per op (~100 B; a GPU sweep's small sizes run 10^5 ops
# per sample): the last MiB of a point's lines, thousands of its timed ops, is what is read.
MAX_READ_BYTES = 2**20


class TuningTrace:
    """This rank's NCCL debug file, read from a mark on."""

    def __init__(self, path: Path):
        self.path = path
        self._folder = path.parent
        self._offset = 0

    @classmethod
    def start(cls, rank: int, environ: MutableMapping[str, str] = os.environ) -> "TuningTrace":
        """Point NCCL's debug output of this process at a new file of its own (before any communicator),
        keeping the user's level and subsystems (debug_conflict has refused those it cannot keep)."""
        folder = Path(tempfile.mkdtemp(prefix="nccl-bench-trace-"))
        path = folder / KEPT_NAME.format(rank=rank)
        if "NCCL_DEBUG" in environ and "NCCL_DEBUG_SUBSYS" not in environ:  # the user's INFO lines, and ours
            environ["NCCL_DEBUG_SUBSYS"] = DEFAULT_SUBSYS_AND_TUNING
        for name, value in TRACE_ENV.items():
            environ.setdefault(name, value)
        environ[DEBUG_FILE_ENV] = str(path)
        return cls(path)

    def keep(self, run_dir: Path, environ: MutableMapping[str, str] = os.environ) -> None:
        """The log moved into the run folder (rank 0, as the run ends), and NCCL_DEBUG_FILE, which
        meta.json records, pointed at where it now is."""
        target = Path(run_dir) / self.path.name
        with contextlib.suppress(OSError):
            shutil.move(str(self.path), target)
            self.path = target
            environ["NCCL_DEBUG_FILE"] = str(target)

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
        """The temporary folder removed (a log moved into the run folder by keep() stays)."""
        with contextlib.suppress(OSError):
            shutil.rmtree(self._folder)

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


def debug_conflict(environ: Mapping[str, str]) -> str | None:
    """Why the user's NCCL debug settings and --nccl-trace cannot go together, or None.

    The trace needs NCCL's INFO lines of the TUNING subsystem in a file of its own. NCCL_DEBUG_SUBSYS
    is a comma-separated list, or with a leading ^ a list of subsystems left out (src/debug.cc);
    ALL names every subsystem."""
    level = environ.get("NCCL_DEBUG", "").strip()
    if level and level.upper() not in LOGS_INFO:
        return f"needs NCCL_DEBUG=INFO (its tuning lines are INFO lines), and NCCL_DEBUG={level} is set; unset it"
    subsys = environ.get("NCCL_DEBUG_SUBSYS", "").strip()
    if subsys:
        names = {name.strip().upper() for name in subsys.removeprefix("^").split(",")}
        listed = "TUNING" in names or "ALL" in names
        if listed == subsys.startswith("^"):
            return (f"needs NCCL_DEBUG_SUBSYS to include TUNING, and NCCL_DEBUG_SUBSYS={subsys} leaves it out; "
                    "add it or unset the variable")
    if environ.get("NCCL_DEBUG_FILE", "").strip():
        return (f"writes NCCL's log to a file of each rank's own, and NCCL_DEBUG_FILE={environ['NCCL_DEBUG_FILE']} "
                "is set; unset it (the trace keeps rank 0's log in the run folder)")
    return None
