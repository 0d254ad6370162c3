"""Files the offline commands write, on a full disk, and stdout where it is the product: one line naming
the file, EXIT_RUN_FAILED, no half-written file left, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED
from tests.helpers.launch import REPO, run_cli, worker_env
from tests.helpers.rows import row, write_run
from tests.helpers.small_disk import fill, small_disk


def _assert_one_line(result, message: str) -> None:
    assert result.returncode == EXIT_RUN_FAILED, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"nccl-bench: error: {message}"]


def test_a_report_written_to_a_full_device_is_one_line(tmp_path):
    run = write_run(tmp_path / "run", [row()])
    _assert_one_line(run_cli(["report", str(run), "--format", "csv", "--output", "/dev/full"]),
                     "no space left on /dev/full")


@pytest.mark.parametrize("flag", ["--json", "--junit", "--markdown"])
def test_a_comparison_export_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, flag):
    run = write_run(tmp_path / "run", [row()])
    with small_disk(tmp_path / "disk", 64 * 1024) as disk:
        fill(disk)
        result = run_cli(["compare", str(run), str(run), flag, str(disk / "out.txt")])
        _assert_one_line(result, f"no space left on {disk / 'out.txt'}")
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("command", [["ops"], ["limits"], ["limits", "--json"], ["report", "RUN"],
                                     ["report", "RUN", "--format", "csv"], ["compare", "RUN", "RUN"], ["--help"]])
def test_a_product_printed_to_a_full_stdout_fails_in_one_line(tmp_path, command):
    """Where stdout is the command's product, losing it is a failed command (as for `cat`), not exit 0."""
    run = write_run(tmp_path / "run", [row()])
    argv = [str(run) if arg == "RUN" else arg for arg in command]
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nccl_bench", *argv], stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=120, env=worker_env(), cwd=REPO)
    _assert_one_line(result, "stdout: No space left on device; the output was not written")
