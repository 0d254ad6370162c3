"""`nccl-bench ops`: the collectives, with their size meaning and bus-bandwidth factor."""

from __future__ import annotations


def ops_command() -> None:
    """List every collective with its size meaning and bus-bandwidth factor."""
    from nccl_bench.render.live import make_console, print_lines, table_width
    from nccl_bench.render.tables import ops_lines

    console = make_console()
    print_lines(console, ops_lines(table_width(console)))
