"""cli/messages.py: every error is one `nccl-bench: error:` line from one printer, then its exit code."""

from __future__ import annotations

import pytest

from nccl_bench.cli import messages
from nccl_bench.errors import EXIT_RUN_FAILED, RunFailedError


def test_fail_prints_one_error_line_and_exits_with_the_code(capsys):
    with pytest.raises(SystemExit) as info:
        messages.fail("--out: no", 2)
    assert info.value.code == 2
    assert capsys.readouterr() == ("", "nccl-bench: error: --out: no\n")


def test_a_failed_run_is_one_line_unless_another_rank_prints_it(capsys):
    with pytest.raises(SystemExit) as info:
        messages.end_failed_run(RunFailedError("rank 1 died"))
    assert info.value.code == EXIT_RUN_FAILED and capsys.readouterr().err == "nccl-bench: error: rank 1 died\n"
    with pytest.raises(SystemExit) as info:
        messages.end_failed_run(RunFailedError("rank 1 died", quiet=True))
    assert info.value.code == EXIT_RUN_FAILED and capsys.readouterr().err == ""


def test_notes_and_warnings_share_the_prefix(capsys):
    messages.notes(["a", "b"])
    messages.show_warning("odd file", UserWarning, "f.py", 1)
    assert capsys.readouterr().err == "nccl-bench: note: a\nnccl-bench: note: b\nnccl-bench: warning: odd file\n"


def test_a_control_character_from_a_file_is_shown_escaped(capsys):
    from nccl_bench.cli import messages

    messages.show_warning("run.log: the log says: \x1b[2Jfailure\x07", UserWarning, "f", 1)
    assert capsys.readouterr().err == "nccl-bench: warning: run.log: the log says: \\x1b[2Jfailure\\x07\n"


def test_what_the_backend_said_follows_the_one_line_answer(capsys):
    failure = RunFailedError("setting up the sweep failed on rank 1: NCCL error", exit_code=3)
    failure.details = ("node2:7:9 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2 failed",)
    with pytest.raises(SystemExit) as info:
        messages.end_failed_run(failure)
    assert info.value.code == 3
    assert capsys.readouterr().err.splitlines() == [
        "nccl-bench: error: setting up the sweep failed on rank 1: NCCL error",
        "nccl-bench: note: the backend said: node2:7:9 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: "
        "Connect to 10.0.0.2 failed",
    ]


def test_a_newline_in_a_path_keeps_the_error_one_line(capsys):
    with pytest.raises(SystemExit):
        messages.fail("RUN: no results found at run\n# X", 2)
    assert capsys.readouterr().err == "nccl-bench: error: RUN: no results found at run\\x0a# X\n"
