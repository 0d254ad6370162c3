"""The files that carry a command's verdict (--junit, --markdown, a --json FILE) never left from an
earlier run: a command that ends before it judges (bad input found late, a run not in the history or
not complete, a store unusable, an interrupt) writes its JUnit and Markdown saying it could not judge,
and removes a JSON file (its readers expect the verdict's keys, not an error's)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import typer

from nccl_bench.cli import messages
from nccl_bench.cli.option_sets import HISTORY
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, StoreError, first_line


@dataclass(frozen=True)
class VerdictFiles:
    suite: str  # the JUnit suite's name and the Markdown title: the command, as CI lists it
    junit: Optional[Path] = None
    markdown: Optional[Path] = None
    json: Optional[Path] = None


@contextlib.contextmanager
def judged_or_said(files: VerdictFiles) -> Iterator[None]:
    """The command's body: an end other than a verdict (exit 0 or 1) leaves its files saying so."""
    try:
        yield
    except (SystemExit, typer.Exit) as exc:
        code = exc.code if isinstance(exc, SystemExit) else exc.exit_code
        if code not in (None, EXIT_OK, EXIT_VERDICT):
            _not_judged(files, getattr(exc, "message", None) or f"the command ended with exit {code}")
        raise
    except KeyboardInterrupt:
        _not_judged(files, "interrupted")
        raise
    except StoreError as exc:
        _not_judged(files, f"{HISTORY.name}: {messages.history_named(str(exc))}")
        raise
    except BaseException as exc:
        _not_judged(files, first_line(exc))
        raise


def cleared(*paths: Optional[Path]) -> None:
    """Files a run writes at its end (doctor's and replay's --json FILE) removed before it starts: a run
    that fails or is interrupted leaves none, never an earlier run's. Every rank may clear them: rank 0
    writes them after the rendezvous, which no rank reaches before clearing."""
    for path in paths:
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _not_judged(files: VerdictFiles, why: str) -> None:
    """Each file says the command could not judge; one that cannot be written is removed (the command's
    own end is the line it says, not this file's)."""
    from nccl_bench.render import unjudged
    from nccl_bench.results.whole_file import replace_whole

    for path, text in ((files.junit, lambda: unjudged.junit(files.suite, why)),
                       (files.markdown, lambda: unjudged.markdown(files.suite, why)), (files.json, None)):
        if path is None:
            continue
        try:
            if text is None:
                raise OSError("a JSON file is removed")
            replace_whole(path, text())
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
