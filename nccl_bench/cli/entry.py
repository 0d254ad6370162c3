"""The `nccl-bench` app and its entry: parse the command line, run the command, map every failure to
one line and an exit code (README "Exit codes"), never a traceback.

Option names are chosen so that `torchrun ... -m nccl_bench <command> <options>` passes every one
of them through untouched (torchrun rejects ambiguous prefixes of its own options, such as --no).
Heavy imports (torch, pandas, matplotlib) happen inside the commands, so --help answers at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

import typer

from nccl_bench.cli import (
    compare,
    doctor,
    history,
    limits,
    messages,
    ops,
    replay,
    report,
    streams,
    sweep,
    typer_shim,
)
from nccl_bench.cli.option_sets import HISTORY
from nccl_bench.cli.params import param
from nccl_bench.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    RunFailedError,
    StoreError,
    UserInputError,
    os_error_text,
)
from nccl_bench.options import HELP_FLAGS, VERSION

app = typer.Typer(
    name="nccl-bench",
    help="Measure collective-communication bandwidth through torch.distributed, as nccl-tests does.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rendering it with rich imports typer.rich_utils (~0.12 s), which alone would
    # take `--help` past its 0.3 s budget (benchmarks/startup.py).
    rich_markup_mode=None,
    context_settings={"help_option_names": list(HELP_FLAGS)},
)


def _print_version(value: bool) -> None:
    if value:
        import nccl_bench

        typer.echo(f"nccl-bench {nccl_bench.__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main_options(
    version: bool = param(VERSION, given_default=True, callback=_print_version, is_eager=True),
) -> None:
    """Measure collective-communication bandwidth through torch.distributed, as nccl-tests does."""


for _name, _command in (
    ("ops", ops.ops_command),
    ("sweep", sweep.sweep_command),
    ("compare", compare.compare_command),
    ("report", report.report_command),
    ("limits", limits.limits_command),
    ("doctor", doctor.doctor_command),
    ("replay", replay.replay_command),
):
    app.command(_name)(_command)
app.add_typer(history.app, name="history")


def program() -> NoReturn:
    """The process's entry (the console script, `python -m nccl_bench`, torchrun's workers): main,
    then the exit, which for a process that loaded torch skips the interpreter's teardown.

    By then every file the command writes is written, synced and closed, and the process group is
    destroyed; what remains is freeing torch's objects, about 1 s per process on a 2-core host (each
    rank, then the process that started local workers), which a scheduler's job and a user's shell
    would wait for with nothing gained. Code that calls main() in its own process keeps its teardown.
    """
    code: object = EXIT_OK
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    if "torch" not in sys.modules:
        sys.exit(code)
    if code is not None and not isinstance(code, int):  # sys.exit("text"): the text, then exit 1
        messages.plain(str(code))
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe must not delay the exit
            stream.flush()
    os._exit(code or EXIT_OK)


def main() -> None:
    """The command line: one line and a non-zero exit for every known failure, never a traceback."""
    import warnings

    streams.guard_output()
    warnings.showwarning = messages.show_warning
    _refuse_a_deleted_working_folder()
    code: object = EXIT_OK
    try:
        _run_app()
    except SystemExit as exc:
        code = exc.code
        raise
    finally:
        _say_lost_stdout(code)


def _refuse_a_deleted_working_folder() -> None:
    """torch cannot load from a working folder that is gone (oneMKL ends the process saying only that it
    cannot load libtorch_cpu.so), and relative paths would name nothing: say so before anything is imported."""
    try:
        os.getcwd()
    except OSError as exc:
        messages.fail(f"the working folder cannot be read ({exc.strerror or exc}: deleted or unmounted?); "
                      "cd to an existing folder and run again", EXIT_BAD_INPUT)


def _say_lost_stdout(code: object) -> None:
    """A full stdout: a warning where it only showed the run, a failed command where it was the product."""
    lost = streams.lost_stdout()
    if lost is None:
        return
    if not streams.stdout_is_product():
        messages.say(f"warning: {lost}")
    elif code in (None, EXIT_OK):
        messages.fail(lost, EXIT_RUN_FAILED)
    else:
        messages.error(lost)  # the command's own failure (its verdict, bad input) keeps its code


def _run_app() -> None:
    try:
        command = typer.main.get_command(app)
        typer_shim.convert_without_pydantic(command)
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        exit_code = command(standalone_mode=False)
        if isinstance(exit_code, int) and exit_code:
            sys.exit(exit_code)
    except UserInputError as exc:
        messages.fail(str(exc), exc.exit_code)
    except RunFailedError as exc:
        messages.end_failed_run(exc)
    except StoreError as exc:  # the history: unusable now (3), or no history at all (2)
        messages.fail(f"{HISTORY.name}: {messages.history_named(str(exc))}", exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        messages.fail("interrupted", EXIT_INTERRUPTED)
    except typer_shim.click_usage_errors() as exc:
        typer_shim.end_usage_error(exc)
    except (OSError, MemoryError, RuntimeError) as exc:
        _end_with_os_failure(exc)


def _end_with_os_failure(exc: BaseException) -> NoReturn:
    """A limit that ran out (open files, processes, memory: torch's store says EMFILE in a RuntimeError),
    or a file the command writes (a full disk, a read-only mount): one line, exit 3. Anything else is a bug."""
    from nccl_bench.ranks.preflight import exhausted_resource_text

    exhausted = exhausted_resource_text(exc)
    if exhausted is not None:
        messages.fail(exhausted, EXIT_RUN_FAILED)
    if not isinstance(exc, OSError):
        raise exc
    messages.fail(os_error_text(exc), EXIT_RUN_FAILED)
