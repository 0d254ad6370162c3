"""Every line the CLI writes to stderr, in one place: notes, warnings and the one error line start
`nccl-bench: `; what a command wrote where (`wrote csv to out.csv`) is said as it is.

An error ends the command with its exit code (README "Exit codes"); a rank stuck where its process
group's abort cannot reach ends the process at once.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, NoReturn

from nccl_bench.errors import RunFailedError
from nccl_bench.render.escape import one_line, terminal_text


def say(message: str) -> None:
    """One stderr line; text from files in it (a log's failure line, a path) never sends a control character,
    nor a newline that would make the one line two."""
    print(one_line(f"nccl-bench: {message}"), file=sys.stderr, flush=True)


def plain(message: str) -> None:
    """One stderr line without the `nccl-bench: ` prefix: where a file the user asked for was written."""
    print(terminal_text(message), file=sys.stderr, flush=True)


def notes(lines: Iterable[str]) -> None:
    for line in lines:
        say(f"note: {line}")


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings the core returns about the user's files: one plain line each (warnings.showwarning)."""
    say(f"warning: {message}")


def history_named(text: str) -> str:
    """Text from the history's modules, which name the option that sets its wait by key, with its flag."""
    from nccl_bench.cli.option_sets import HISTORY_WAIT
    from nccl_bench.errors import with_names
    from nccl_bench.history.address import WAIT_KEY

    return with_names(text, (WAIT_KEY,), lambda key: HISTORY_WAIT.name)


def say_naming_history(message: str) -> None:
    """`say` for the history's modules (history_named)."""
    say(history_named(message))


def error(message: str) -> None:
    say(f"error: {message}")


class Failed(SystemExit):
    """The end `fail` said: its exit code, and the line, for the files that must say it too (verdict_files)."""

    def __init__(self, message: str, code: int):
        super().__init__(code)
        self.message = message


def fail(message: str, code: int) -> NoReturn:
    """End the command with one error line and this exit code."""
    error(message)
    raise Failed(message, code)


def end_failed_run(exc: RunFailedError) -> NoReturn:
    """A run that failed after it started: one line (unless another rank prints it), its exit code."""
    if exc.exit_at_once:
        end_stuck_rank(exc)
    if exc.quiet:
        raise SystemExit(exc.exit_code)
    error(str(exc))
    notes(f"the backend said: {line}" for line in exc.details)
    raise SystemExit(exc.exit_code)


def end_stuck_rank(exc: RunFailedError) -> NoReturn:
    """A rank's deadline aborted its process group, or gave up on its main thread (stuck where no abort
    reaches): report, then end the process at once, without torch's teardown (it would join threads
    the abort left waiting); meta.json already says failed, and every finished row is on disk."""
    if not exc.quiet:
        error(str(exc))
    sys.stdout.flush()
    os._exit(exc.exit_code)
