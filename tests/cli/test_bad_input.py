"""Every class of bad input: one stderr line naming the option (or file) and the problem, exit 2,
nothing on stdout, no traceback, and no worker or process group started.

Each case here is one row of the README table "Bad input and what it says". The command runs as
`python -m nccl_bench ...` in a fresh process, exactly as a user would see it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_bench.config import CONFIG_KEYS
from nccl_bench.ranks.collectives import OP_NAMES

ERROR = "nccl-bench: error: "


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nccl_bench", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, COLUMNS="200"),
    )


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(ERROR)
    return lines[0][len(ERROR):]


# (case id, arguments, exact message after "nccl-bench: error: "); {tmp} is the test's folder.
EXACT = [
    ("malformed size", ["sweep", "--sizes", "1K,1Q"], "--sizes: expected a byte size like 8, 1K, 64M or 1G, got '1Q'"),
    ("min above max", ["sweep", "-b", "1M", "-e", "1K"], "--min-bytes: 1M is above --max-bytes 1K"),
    ("step factor <= 1", ["sweep", "-f", "1"], "--step-factor: must be greater than 1, got 1.0"),
    ("unknown op", ["sweep", "--op", "allreduce2"],
     f"--op: unknown collective 'allreduce2'; choose from {', '.join(OP_NAMES)} or all"),
    ("unknown dtype", ["sweep", "--dtype", "float8"],
     "--dtype: 'float8' is not one of float32, float16, bfloat16, float64, int8, uint8, int32, int64"),
    ("unknown reduce op", ["sweep", "--reduce-op", "xor"], "--reduce-op: 'xor' is not one of sum, prod, min, max, avg"),
    ("reduce op the dtype cannot do", ["sweep", "--reduce-op", "avg", "--dtype", "int32"],
     "--reduce-op: avg needs a floating-point --dtype, got int32"),
    ("timeout not positive", ["sweep", "--timeout", "0"], "--timeout: must be greater than 0, got 0.0"),
    ("no workers", ["sweep", "--workers", "0"], "--workers: must be at least 1, got 0"),
    ("root outside the world", ["sweep", "--op", "broadcast", "--root", "5", "--workers", "2", "--sizes", "1K"],
     "--root: 5 is not a rank of a world of 2"),
    ("missing config", ["sweep", "--config", "{tmp}/none.toml"], "--config: no such file: {tmp}/none.toml"),
    ("unknown config key", ["sweep", "--config", "{tmp}/unknown.toml"],
     f"{{tmp}}/unknown.toml: unknown key 'bogus'; known keys: {', '.join(CONFIG_KEYS)}"),
    ("bad config value", ["sweep", "--config", "{tmp}/badvalue.toml"],
     "{tmp}/badvalue.toml: warmup: expected a whole number, got 'x'"),
    ("results folder not empty", ["sweep", "--sizes", "1K", "--out", "{tmp}/full"],
     "--out: {tmp}/full already exists and is not empty; a run never overwrites results"),
    ("unwritable results folder", ["sweep", "--sizes", "1K", "--out", "{tmp}/afile/run"],
     "--out: cannot write to {tmp}/afile/run: Not a directory"),
    ("missing CSV (compare)", ["compare", "{tmp}/none.csv", "{tmp}/none.csv"], "BASELINE: no results found at {tmp}/none.csv"),
    ("foreign CSV (compare)", ["compare", "{tmp}/foreign.csv", "{tmp}/foreign.csv"],
     "BASELINE: {tmp}/foreign.csv is not an nccl_bench results CSV (no schema_version column)"),
    ("missing run (report)", ["report", "{tmp}/none"], "RUN: no results found at {tmp}/none"),
    ("foreign file (report)", ["report", "{tmp}/foreign.csv"], "RUN: {tmp}/foreign.csv: no nccl-tests result lines found"),
    ("unknown command", ["frobnicate"], "No such command 'frobnicate'."),
    ("missing argument", ["compare"], "Missing argument 'BASELINE'."),
    ("option without its value", ["sweep", "--op"], "Option '--op' requires an argument."),
]

# Messages that carry numbers of this machine or library wording: matched as patterns.
PATTERN = [
    ("sizes beyond free memory", ["sweep", "--sizes", "1K,1T", "--workers", "2"],
     r"--sizes: the sweep needs [\d,]+ MiB of host memory \(2 rank\(s\) x [\d,]+ MiB\) "
     r"but only [\d,]+ MiB is available; lower --sizes"),
    ("backend not built into torch", ["sweep", "--backend", "mpi", "--workers", "2", "--sizes", "1K"],
     r"--backend: this torch \(\S+\) was built without mpi; use gloo"),
    ("malformed config", ["sweep", "--config", "{tmp}/malformed.toml"], r"--config: \S+/malformed\.toml is not valid TOML: .+"),
    ("unknown option", ["sweep", "--bogus"], r"No such option: --bogus.*"),
    ("not a number", ["sweep", "--warmup", "x"], r"Invalid value for '-w' / '--warmup': .+"),
]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "unknown.toml").write_text('ops = "all_reduce"\nbogus = 3\n')
    (tmp_path / "badvalue.toml").write_text('warmup = "x"\n')
    (tmp_path / "malformed.toml").write_text("ops = [\n")
    (tmp_path / "foreign.csv").write_text("a,b\n1,2\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "results.csv").write_text("precious\n")
    (tmp_path / "afile").write_text("")
    return tmp_path


@pytest.mark.parametrize("case, args, message", EXACT, ids=[c[0] for c in EXACT])
def test_exact_message(files, case, args, message):
    args = [a.format(tmp=files) for a in args]
    assert _one_error_line(_run(files, *args)) == message.format(tmp=files)


@pytest.mark.parametrize("case, args, pattern", PATTERN, ids=[c[0] for c in PATTERN])
def test_message_pattern(files, case, args, pattern):
    args = [a.format(tmp=files) for a in args]
    assert re.fullmatch(pattern, _one_error_line(_run(files, *args)))


def test_nccl_backend_without_gpu(files):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA GPU, so --backend nccl is valid here")
    message = _one_error_line(_run(files, "sweep", "--backend", "nccl", "--workers", "2", "--sizes", "1K"))
    assert message == "--backend: nccl needs CUDA GPUs, and none is available here; use gloo"


def test_existing_results_are_left_untouched(files):
    _one_error_line(_run(files, "sweep", "--sizes", "1K", "--out", str(files / "full")))
    assert (files / "full" / "results.csv").read_text() == "precious\n"
    assert sorted(p.name for p in (files / "full").iterdir()) == ["results.csv"]


def test_no_arguments_prints_help_and_exits_2(tmp_path):
    result = _run(tmp_path)
    assert result.returncode == 2
    assert "Usage" in result.stdout and "Traceback" not in result.stderr
