"""Tables read whole at 80, 120 and 200 columns on a real terminal (a pty) and piped.

One real 2-rank gloo sweep, piped; then `report` of it piped and on a pty at three widths, one
more sweep on an 80-column pty (the live table), and ops/compare/limits at 80 columns.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from nccl_bench.render.tables import result_columns
from tests.helpers.launch import REPO, SHARED_SWEEP, run_cli, worker_env

pytestmark = pytest.mark.integration

SWEEP = SHARED_SWEEP  # the sweep piped_run ran
WIDTHS = (80, 120, 200)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_pty(args: list[str], columns: int, timeout: float = 180) -> str:
    """`python -m nccl_bench ARGS` on a pseudo-terminal of `columns`; the screen's lines, escapes removed.

    A progress bar redraws its line with carriage returns; what stays on screen is the text after
    the last one, as a person would see it.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = worker_env({"TERM": "xterm-256color"})
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    process = subprocess.Popen([sys.executable, "-m", "nccl_bench", *args], stdin=slave, stdout=slave, stderr=slave,
                               env=env, cwd=REPO, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait(timeout=timeout) == 0, b"".join(chunks).decode(errors="replace")[-2000:]
    lines = [_ANSI.sub("", line.rstrip("\r").split("\r")[-1]) for line in b"".join(chunks).decode().split("\n")]
    return "\n".join(line for line in lines if not line.startswith("sweep "))  # the transient progress bar


def table_parts(text: str) -> tuple[str, str, list[str]]:
    """(names line, units line, row lines) of the results table in a command's output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# op "))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("  "):
            break
        rows.append(line)
    return lines[start], lines[start + 1], rows


def spans(line: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", line)]


def assert_aligned(names: str, units: str, rows: list[str]) -> list[str]:
    """Every value ends under its heading's end (numbers) or starts under its start (words).

    Returns the names of the columns shown. Flags (free text, last) may be empty.
    """
    heads = spans(names)[1:]  # the leading '#'
    shown = [h for _, _, h in heads]
    assert shown[0] == "op" and shown[-1] == "flags"
    align = {c.name: c.align for c in result_columns()}
    unit_ends = {end for _, end, _ in spans(units)[1:]}
    for row in rows:
        values = spans(row)[: len(heads) - 1]
        assert len(values) == len(heads) - 1, (names, row)
        # values stop before the wrapping flags column
        for (h_start, h_end, name), (v_start, v_end, value) in zip(heads, values, strict=False):
            if align[name] == "right":
                assert v_end == h_end, f"{value!r} ends at {v_end}, heading {name!r} at {h_end}\n{names}\n{row}"
            else:
                where = f"{value!r} starts at {v_start}, heading {name!r} at {h_start}"
                assert v_start == h_start, f"{where}\n{names}\n{row}"
    assert unit_ends <= {end for start, end, _ in heads}  # '(us)' sits under 'time', right-aligned
    return shown


@pytest.fixture
def piped_run(shared_sweep) -> tuple[Path, str]:
    """A two-rank sweep of SWEEP's ops at three sizes, its stdout piped at COLUMNS=80 (tests/conftest.py)."""
    return shared_sweep


def test_piped_sweep_prints_every_column_aligned_and_its_rows_are_what_report_prints(piped_run):
    run_dir, sweep_out = piped_run
    names, units, rows = table_parts(sweep_out)
    assert len(rows) == 9  # all_reduce in-place x 3 sizes, all_gather both placements x 3
    assert assert_aligned(names, units, rows) == [c.name for c in result_columns()]  # COLUMNS=80 cut nothing
    for width in WIDTHS:
        report = run_cli(["report", str(run_dir)], env={"COLUMNS": str(width)})
        assert report.returncode == 0, report.stderr
        assert table_parts(report.stdout) == (names, units, rows)


@pytest.mark.parametrize("width", WIDTHS)
def test_report_on_a_terminal_fits_and_shows_every_value_whole(piped_run, width):
    run_dir, sweep_out = piped_run
    _, _, piped_rows = table_parts(sweep_out)
    piped_names = [h for _, _, h in spans(table_parts(sweep_out)[0])[1:]]
    screen = run_on_pty(["report", str(run_dir)], width)
    assert "…" not in screen
    names, units, rows = table_parts(screen)
    assert all(len(line) <= width for line in (names, units, *rows))
    shown = assert_aligned(names, units, rows)
    for must in ("op", "size", "time", "busbw"):
        assert must in shown
    if width == 200:
        assert shown == piped_names
    else:
        assert f"# not shown at {width} columns:" in screen
    # each shown value is the piped value, whole
    for piped, row in zip(piped_rows, rows, strict=False):
        full = dict(zip(piped_names, [v for _, _, v in spans(piped)], strict=False))
        assert [v for _, _, v in spans(row)] == [full[name] for name in shown[: len(spans(row))]]


def test_live_sweep_on_an_80_column_terminal(tmp_path):
    screen = run_on_pty([*SWEEP, "--no-plot", "--sizes", "1K,1M", "--out", str(tmp_path / "run")], 80)
    assert "…" not in screen
    names, units, rows = table_parts(screen)
    assert len(rows) == 6 and all(len(line) <= 80 for line in (names, units, *rows))
    # room for a flag is kept before any row exists (a row's flags are not known before it is measured):
    # the columns that always stay, then as many others as fit, by priority
    assert {"op", "size", "time", "busbw", "flags"} <= set(assert_aligned(names, units, rows))


@pytest.mark.parametrize("command", [["ops"], ["limits"], ["compare", "{run}", "{run}"]])
def test_other_tables_fit_80_columns_without_cutting(piped_run, command):
    run_dir, _ = piped_run
    screen = run_on_pty([str(run_dir) if arg == "{run}" else arg for arg in command], 80)
    assert "…" not in screen
    free_text = ("CURRENT", "Host memory", "Peak", "No NVIDIA", "OK:")
    assert all(len(line) <= 80 for line in screen.splitlines() if not line.startswith(free_text))
    if command == ["ops"]:
        assert "reduce_scatter" in screen and "2(n-1)/n" in screen
    if command[0] == "compare":
        assert "2,097,152" in screen and "verdict" in screen  # the largest size, whole
