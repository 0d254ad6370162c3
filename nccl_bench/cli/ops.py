"""`nccl-bench ops`: the collectives, with their size meaning and bus-bandwidth factor."""

from __future__ import annotations


def ops_command() -> None:
    """List every collective with its size meaning and bus-bandwidth factor."""
    from nccl_bench.render.tables import make_console, ops_lines, print_lines, table_width

    console = make_console()
    print_lines(console, ops_lines(table_width(console)))
