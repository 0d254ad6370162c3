"""`nccl-bench limits`: what the links promise per GPU, and the peak busbw is compared with."""

from __future__ import annotations

import typer

from nccl_bench.cli.option_sets import LimitsArgs
from nccl_bench.cli.params import command_of


@command_of
def limits_command(args: LimitsArgs) -> None:
    """Show what the links promise per GPU (NVLink, PCIe) and the peak busbw is compared with."""
    from nccl_bench.hardware.detect import detect_limits, peak_from_limits
    from nccl_bench.hardware.expected import host_entries

    as_json, multi_node = args.as_json, args.multi_node
    limits = detect_limits()
    device_kind = "cuda" if limits.gpus else "cpu"
    peak, peak_warnings = peak_from_limits(limits, multi_node, device_kind)
    expected = host_entries(limits, nodes=None if multi_node else 1)  # across nodes, how many is unknown here
    if as_json:
        from nccl_bench.render.limits_text import limits_json
        from nccl_bench.results.whole_file import strict_json

        typer.echo(strict_json(limits_json(limits, peak, peak_warnings, expected), indent=2))
        return
    from nccl_bench.render.limits_text import limits_lines
    from nccl_bench.render.live import make_console, print_lines, table_width

    console = make_console()
    print_lines(console, limits_lines(limits, peak, peak_warnings, table_width(console), expected))
