"""The files that carry a command's verdict (--junit, --markdown, a --json FILE) never left from an
earlier run: a command that ends before it judges (bad input found late, a run not in the history or
not complete, a store unusable, an interrupt) writes its JUnit and Markdown saying it could not judge,
and removes a JSON file (its readers expect the verdict's keys, not an error's).

A run's --prom file is never an earlier run's either: node_exporter's textfile collector serves whatever
the file holds, so a file left from yesterday keeps every alert green. It is replaced when the run starts
by one that says the run has not completed, and at an end before the run's own metrics (a failure, an
interrupt, a refusal) by what was measured and how the run ended. The files a command writes whole at its
end (report's, `history html`'s page) are removed when it fails."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import typer

from nccl_bench.cli import messages
from nccl_bench.cli.option_sets import HISTORY
from nccl_bench.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_VERDICT,
    RunFailedError,
    StoreError,
    UserInputError,
    first_line,
)


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
        code = _exit_code(exc)
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


@contextlib.contextmanager
def written_or_removed(outputs: Sequence[Optional[Path]], inputs: Sequence[Path] = ()) -> Iterator[None]:
    """The body of a command that writes whole files at its end (report's --output, --plot and --html,
    `history html`): an end other than its answer (exit 0 or 1) removes the regular files among `outputs`,
    so none is left from an earlier run beside the one line; a file that is also one of `inputs` is kept."""
    try:
        yield
    except (SystemExit, typer.Exit) as exc:
        if _exit_code(exc) not in (None, EXIT_OK, EXIT_VERDICT):
            _remove_outputs(outputs, inputs)
        raise
    except BaseException:
        _remove_outputs(outputs, inputs)
        raise


def outputs_refused(outputs: Sequence[Optional[Path]], inputs: Sequence[Path] = ()) -> None:
    """The options of a command that writes whole files were refused as they were read: none of them is
    left from an earlier run (written_or_removed, for an end its body never reached)."""
    _remove_outputs([None if path is None else Path(path) for path in outputs], inputs)


def _exit_code(exc: SystemExit | typer.Exit) -> int | str | None:
    return exc.code if isinstance(exc, SystemExit) else exc.exit_code


def _remove_outputs(outputs: Sequence[Optional[Path]], inputs: Sequence[Path]) -> None:
    for path in outputs:
        if path is None or not Path(path).is_file():
            continue
        with contextlib.suppress(OSError):
            if not any(Path(given).exists() and os.path.samefile(path, given) for given in inputs):
                Path(path).unlink()


def cleared(*paths: Optional[Path]) -> None:
    """Files a run writes at its end (doctor's and replay's --json FILE) removed before it starts: a run
    that fails or is interrupted leaves none, never an earlier run's. Every rank may clear them: rank 0
    writes them after the rendezvous, which no rank reaches before clearing."""
    for path in paths:
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


@dataclass(frozen=True)
class MetricsFile:
    """A run's --prom file: where, which command's, and the flag that named it (for a write that fails)."""

    path: Optional[Path]
    command: str  # "sweep", "doctor": the command label of the run's metrics
    option: str


STARTED = "started"  # the run_info status of a file replaced at the start: the run has not completed
_STATUS_OF_EXIT = {EXIT_BAD_INPUT: "refused", EXIT_INTERRUPTED: "interrupted"}  # any other end: "failed"


@contextlib.contextmanager
def metrics_of_this_run(metrics: MetricsFile, writes_it: bool) -> Iterator[None]:
    """The command's body: --prom replaced at once by a file that says the run has not completed, and, when
    the body ends by an exception before a rank wrote what it measured (the file is still the one written
    here), by one that says how it ended. `writes_it`: this process speaks for the run (the process that
    starts local workers, or rank 0 of a launcher's); the other ranks leave the file alone."""
    if metrics.path is None or not writes_it:
        yield
        return
    started = _write_status(metrics, STARTED)
    try:
        yield
    except BaseException as exc:
        if started is not None and _same_file(metrics.path, started):
            _write_status(metrics, unfinished_status(exc))
        raise


def metrics_refused(path: Optional[Path], command: str, option: str, exc: UserInputError) -> None:
    """A run refused as its options were read (its body never ran): --prom says so, with nothing measured,
    in the process that would have written it."""
    from nccl_bench.cli.on_ranks import writes_run_outputs

    if path is not None and writes_run_outputs():
        _write_status(MetricsFile(Path(path), command, option), unfinished_status(exc))


def verdict_refused(files: VerdictFiles, exc: UserInputError) -> None:
    """A command's options were refused as they were read: its JUnit and Markdown say it could not judge,
    its JSON is removed (judged_or_said, for an end its body never reached)."""
    paths = (None if path is None else Path(path) for path in (files.junit, files.markdown, files.json))
    _not_judged(VerdictFiles(files.suite, *paths), first_line(exc))


def metrics_so_far(metrics: MetricsFile, run_dir: Optional[Path], render: Callable[[dict, float], str],
                   exc: BaseException) -> None:
    """Rank 0's --prom after its run ended by an exception: `render` given the run's final meta.json (whose
    status says how it ended), or, where the run never wrote one, a status read from the exception."""
    from nccl_bench.results.run_folder import read_meta

    meta = (read_meta(run_dir) if run_dir is not None else None) or {"status": unfinished_status(exc)}
    _write_unfinished(metrics, lambda _, now: render(meta, now))


def unfinished_status(exc: BaseException) -> str:
    """How a run that raised `exc` ended, in run_info's words: refused, interrupted or failed."""
    from nccl_bench.ranks.faults import Interrupted

    if isinstance(exc, (Interrupted, KeyboardInterrupt)):
        return _STATUS_OF_EXIT[EXIT_INTERRUPTED]
    if isinstance(exc, (UserInputError, RunFailedError)):
        code = exc.exit_code
    elif isinstance(exc, (SystemExit, typer.Exit)):
        code = _exit_code(exc)
    else:
        code = EXIT_RUN_FAILED
    return _STATUS_OF_EXIT.get(code, "failed")


def _write_status(metrics: MetricsFile, status: str) -> Optional[os.stat_result]:
    """The run's lines alone, with this status: nothing measured is in the file."""
    from nccl_bench.render.prom import run_metrics

    return _write_unfinished(metrics, lambda _, now: run_metrics(metrics.command, {"status": status}, now))


def _write_unfinished(metrics: MetricsFile, render: Callable[[dict, float], str]) -> Optional[os.stat_result]:
    """The file written (its identity after the write), or None: a file that cannot be written here is said
    by the run's own end (the write at the end names the flag), never instead of it."""
    from nccl_bench.render.live import write_prom

    try:
        write_prom(metrics.path, None, render, metrics.option)
        return os.stat(metrics.path)
    except (RunFailedError, OSError):
        return None


def _same_file(path: Path, written: os.stat_result) -> bool:
    """No rank replaced the file since: a rename over it gives it another inode."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_ino, now.st_dev, now.st_mtime_ns) == (written.st_ino, written.st_dev, written.st_mtime_ns)


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
