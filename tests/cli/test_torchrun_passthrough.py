"""Every option of every command must reach us through torchrun untouched.

torchrun's own parser rejects options after `-m module` that are ambiguous prefixes of its own
(--no, --node, --master, ...), so `torchrun ... -m nccl_bench sweep --no...` could fail before we run.
"""

import typer.main
from torch.distributed.run import get_args_parser

from nccl_bench.cli import app


def _all_options():
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        for param in command.params:
            for option in list(param.opts) + list(param.secondary_opts):
                if option.startswith("-"):
                    yield name, option


def test_commands_have_options_to_check():
    commands = {name for name, _ in _all_options()}
    assert {"sweep", "compare", "report"} <= commands


def test_every_option_passes_through_torchrun_parser():
    parser = get_args_parser()
    failures = []
    for command, option in _all_options():
        argv = ["--standalone", "--nproc_per_node", "2", "-m", "nccl_bench", command, option, "1"]
        try:
            parsed = parser.parse_args(argv)
        except SystemExit:
            failures.append(f"{command} {option}: rejected by torchrun")
            continue
        if parsed.training_script_args != [command, option, "1"]:
            failures.append(f"{command} {option}: torchrun passed {parsed.training_script_args}")
    assert not failures, "\n".join(failures)


def test_the_check_itself_catches_an_ambiguous_prefix():
    parser = get_args_parser()
    try:
        parser.parse_args(["--nproc_per_node", "2", "-m", "nccl_bench", "sweep", "--no", "1"])
    except SystemExit:
        return
    raise AssertionError("torchrun accepted --no; the pass-through test above would prove nothing")
