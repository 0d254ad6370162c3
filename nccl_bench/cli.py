"""Typer command line: parse options, build a config, call the core, map errors to exit codes.

Option names are chosen so that `torchrun ... -m nccl_bench <command> <options>` passes every one
of them through untouched (torchrun rejects ambiguous prefixes of its own options, such as --no).
Heavy imports (torch, pandas, matplotlib) happen inside the commands, so --help answers at once.
"""

from __future__ import annotations

import sys

import typer

from nccl_bench.errors import RunFailedError, UserInputError

app = typer.Typer(
    name="nccl-bench",
    help="Measure collective-communication bandwidth through torch.distributed, as nccl-tests does.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int) -> None:
    typer.echo(f"nccl-bench: error: {message}", err=True)
    raise typer.Exit(code)


@app.command("ops")
def ops_command() -> None:
    """List every collective with its size meaning and bus-bandwidth factor."""
    from rich.console import Console

    from nccl_bench.report import ops_table

    Console().print(ops_table())


def main() -> None:
    """Console-script entry: one line and a non-zero exit for every known failure, never a traceback."""
    try:
        app(standalone_mode=False)
    except UserInputError as exc:
        _print_error(str(exc), exc.exit_code)
    except RunFailedError as exc:
        _print_error(str(exc), exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _print_error("interrupted", 130)
    except _click_usage_errors() as exc:
        _print_error(_click_message(exc), 2)


def _print_error(message: str, code: int) -> None:
    print(f"nccl-bench: error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def _click_usage_errors():
    import click

    return (click.exceptions.UsageError, click.exceptions.BadParameter, click.exceptions.ClickException)


def _click_message(exc) -> str:
    return exc.format_message() if hasattr(exc, "format_message") else str(exc)
