"""The command line: `app` (one typer command per module here) and `main`, the console script's entry."""

from nccl_bench.cli.entry import app, main

__all__ = ["app", "main"]
