"""The command line: `app` (one typer command per module here), `main` (the command line in this
process) and `program` (the console script's entry: main, then the process's exit)."""

from nccl_bench.cli.entry import app, main, program

__all__ = ["app", "main", "program"]
