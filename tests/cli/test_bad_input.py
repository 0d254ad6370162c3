"""Every class of bad input: one stderr line naming the option (or file) and the problem, exit 2,
nothing on stdout, no traceback, and no worker or process group started.

Each case here is one row of the table in docs/bad-input.md. The command runs as
`python -m nccl_bench ...` in a process of its own (exit code, stdout and stderr as a user sees
them), forked from one that has already imported torch (tests/helpers/forked_cli.py); the --help cases and
one refusal that imports torch start a fresh interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_bench.results.run_folder import write_meta
from nccl_bench.results.schema import COLUMNS
from nccl_bench.sweep.sweep_config import CONFIG_KEYS
from nccl_bench.units.op_table import OP_NAMES
from tests.helpers.fake_smi import hidden_h100_env
from tests.helpers.forked_cli import run_forked, run_fresh
from tests.helpers.launch import REPO, worker_env
from tests.helpers.rows import row, write_run
from tests.helpers.small_disk import small_disk
from tests.helpers.traces import collective, write_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"
TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"

ERROR = "nccl-bench: error: "
# Every case runs with its address space bounded, so an input that makes the tool build something
# in proportion to a typed number fails the test instead of taking the host's memory.
ADDRESS_SPACE_LIMIT = 4 * 2**30


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The command in a process of its own, forked from one that has imported torch (tests/helpers/forked_cli.py)."""
    return run_forked(list(args), cwd=tmp_path, env=worker_env({"COLUMNS": "200", **(env or {})}),
                      address_space=ADDRESS_SPACE_LIMIT)


def _run_fresh(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The command in a fresh interpreter, imports and all, exactly as a user starts it."""
    return run_fresh(list(args), cwd=tmp_path, env=worker_env({"COLUMNS": "200", **(env or {})}),
                     address_space=ADDRESS_SPACE_LIMIT)


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
    ("split into one-rank groups", ["sweep", "--split", "rail", "--workers", "2", "--sizes", "1K"],
     "--split: rail on 2 ranks makes groups of 1 rank, which cross no link"),
    ("split into unequal groups", ["sweep", "--split", "mod:3", "--workers", "4", "--sizes", "1K"],
     "--split: mod:3 on 4 ranks makes groups of different sizes"),
    ("unknown split", ["sweep", "--split", "host"], "--split: 'host' is not one of node, rail, mod:N, div:N"),
    ("unknown all_to_allv distribution", ["sweep", "--alltoallv", "zipf"],
     "--alltoallv: 'zipf' is not one of even, random[:SEED], skewed[:HOT]"),
    ("cycles below 0", ["sweep", "--cycles", "-1"], "--cycles: must be at least 0, got -1"),
    ("not an NCCL variable", ["sweep", "--nccl-env", "LD_PRELOAD=x.so"],
     "--nccl-env: 'LD_PRELOAD' is not an NCCL variable (NCCL_ and capitals, digits or _)"),
    ("NCCL value with whitespace", ["sweep", "--nccl-env", "NCCL_ALGO=Ring Tree"],
     "--nccl-env: NCCL_ALGO: 'Ring Tree' is not a value NCCL reads (letters, digits and _ . : ^ ; = , / % + @ -)"),
    ("NCCL value given twice", ["sweep", "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_ALGO=Ring"],
     "--nccl-env: NCCL_ALGO=Ring is given twice"),
    ("baseline with cycles", ["sweep", "--cycles", "3", "--baseline", "{tmp}/none"],
     "--baseline: compares one row per point; --cycles gives several (read the run's rows with "
     "nccl-bench report instead)"),
    ("baseline with variants",
     ["sweep", "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_ALGO=Tree", "--baseline", "{tmp}/none"],
     "--baseline: compares one row per point; --nccl-env gives several (read the run's rows with "
     "nccl-bench report instead)"),
    ("missing config", ["sweep", "--config", "{tmp}/none.toml"], "--config: no such file: {tmp}/none.toml"),
    ("unknown config key", ["sweep", "--config", "{tmp}/unknown.toml"],
     f"{{tmp}}/unknown.toml: unknown key 'bogus'; known keys: {', '.join(CONFIG_KEYS)}"),
    ("bad config value", ["sweep", "--config", "{tmp}/badvalue.toml"],
     "{tmp}/badvalue.toml: warmup: expected a whole number, got 'x'"),
    ("results folder not empty", ["sweep", "--sizes", "1K", "--out", "{tmp}/full"],
     "--out: {tmp}/full already exists and is not empty; a run never overwrites results"),
    ("results folder another run holds", ["sweep", "--sizes", "1K", "--out", "{tmp}/taken"],
     "--out: {tmp}/taken is taken by another run (pid 1 on nodea, 0123abcd); give each run its own folder, or if "
     "that run is gone, remove {tmp}/taken/.claim (check with `ps -p 1` on nodea)"),
    ("unwritable results folder", ["sweep", "--sizes", "1K", "--out", "{tmp}/afile/run"],
     "--out: cannot write to {tmp}/afile/run: Not a directory"),
    ("floor not positive", ["sweep", "--min-busbw", "0"], "--min-busbw: must be greater than 0, got 0.0"),
    ("floor for barrier alone", ["sweep", "--op", "barrier", "--min-busbw", "10"],
     "--min-busbw: barrier sends no message, so no size applies; drop --min-busbw"),
    ("metrics file in a missing folder", ["sweep", "--sizes", "1K", "--prom", "{tmp}/nowhere/x.prom"],
     "--prom: folder {tmp}/nowhere does not exist"),
    ("missing CSV (compare)", ["compare", "{tmp}/none.csv", "{tmp}/none.csv"],
     "BASELINE: no results found at {tmp}/none.csv"),
    ("foreign CSV (compare)", ["compare", "{tmp}/foreign.csv", "{tmp}/foreign.csv"],
     "BASELINE: {tmp}/foreign.csv is not an nccl_bench results CSV (no schema_version column)"),
    ("missing run (report)", ["report", "{tmp}/none"], "RUN: no results found at {tmp}/none"),
    ("foreign file (report)", ["report", "{tmp}/foreign.csv"],
     "RUN: {tmp}/foreign.csv: no nccl-tests result lines found"),
    ("unknown command", ["frobnicate"], "No such command 'frobnicate'."),
    ("missing argument", ["compare"], "Missing argument 'BASELINE'."),
    ("option without its value", ["sweep", "--op"], "Option '--op' requires an argument."),
    # Nothing is built in proportion to a typed number; what cannot mean anything is refused.
    ("linear sizes beyond the cap", ["sweep", "-i", "1", "-b", "1", "-e", "1G"],
     "--step-bytes: steps of 1 from 1 to 1G make 1,073,741,824 sizes; a sweep takes at most 10,000: "
     "raise --step-bytes or narrow -b/--min-bytes .. -e/--max-bytes"),
    ("geometric sizes beyond the cap", ["sweep", "-f", "1.000001", "-b", "1", "-e", "1G"],
     "--step-factor: a factor of 1.000001 from 1 to 1G make more than 10,000 sizes; a sweep takes at most 10,000: "
     "raise --step-factor or narrow -b/--min-bytes .. -e/--max-bytes"),
    ("size list beyond the cap", ["sweep", "--sizes", ",".join(str(i) for i in range(1, 10_002))],
     "--sizes: 10,001 sizes given; a sweep takes at most 10,000"),
    ("trials beyond the cap", ["sweep", "--trials", "1000000000"],
     "--trials: must be at most 1,000, got 1,000,000,000"),
    ("iters beyond the cap", ["sweep", "--iters", "1000000000"],
     "--iters: must be at most 1,000,000, got 1,000,000,000"),
    ("warmup beyond the cap", ["sweep", "--warmup", "10000000000"],
     "--warmup: must be at most 1,000,000, got 10,000,000,000"),
    ("CUDA graph beyond the cap", ["sweep", "--cuda-graph", "100000000"],
     "--cuda-graph: must be at most 10,000, got 100,000,000"),
    ("sweep that would run for days", ["sweep", "-b", "1K", "-e", "4M", "-i", "1K", "--trials", "1000"],
     "--trials: the sweep would take at least 9.5 days (4,096 point(s) x (5 warmup + 1,000 trial(s) x 200 ms)); "
     "at most 7.0 days: lower --trials or measure fewer sizes"),
    ("calibrated samples that would run for days", ["sweep", "--min-sample-ms", "1e12", "--sizes", "1K"],
     "--min-sample-ms: the sweep would take at least 11,574.1 days (1 point(s) x (5 warmup + 1 trial(s) x 1e+12 ms)); "
     "at most 7.0 days: lower --min-sample-ms or measure fewer sizes"),
    ("placement no chosen op has", ["sweep", "--op", "all_reduce", "--no-inplace"],
     "--no-inplace: nothing to measure: all_reduce skipped: torch has no out-of-place form of it"),
    ("sizes for barrier alone", ["sweep", "--op", "barrier", "--sizes", "1M"],
     "--sizes: barrier sends no message, so no size applies; drop --sizes"),
    ("existing baseline", ["sweep", "--sizes", "1K", "--results-root", "{tmp}/results", "--save-baseline", "main"],
     "--save-baseline: baseline 'main' already exists at {tmp}/results/baselines/main; "
     "pass --replace-baseline to replace it"),
    ("--allow-mismatch without --baseline", ["sweep", "--allow-mismatch"],
     "--allow-mismatch: only applies with --baseline"),
    ("--replace-baseline without --save-baseline", ["sweep", "--replace-baseline"],
     "--replace-baseline: only applies with --save-baseline"),
    ("baseline of another world size", ["sweep", "--workers", "3", "--sizes", "1M", "--baseline", "{tmp}/base"],
     "--baseline {tmp}/base: world size differs: the baseline has 2, this sweep would run with 3; "
     "pass --allow-mismatch to compare anyway"),
    ("baseline with nothing in common", ["sweep", "--workers", "2", "--sizes", "2M", "--baseline", "{tmp}/base"],
     "--baseline {tmp}/base: shares no (op, size, dtype, redop, placement) with this sweep's plan; "
     "measure the baseline's ops and sizes (see `nccl-bench report` of it)"),
    ("header-only CSV (report)", ["report", "{tmp}/header_only/results.csv"],
     "RUN: {tmp}/header_only/results.csv has no result rows"),
    ("header-only run folder (report)", ["report", "{tmp}/header_only"], "RUN: {tmp}/header_only has no result rows"),
    ("run without rows (compare)", ["compare", "{tmp}/empty_run", "{tmp}/base"],
     "BASELINE: {tmp}/empty_run has no result rows (meta.json: the run is failed)"),
    ("run without rows, named by its CSV (compare)", ["compare", "{tmp}/empty_run/results.csv", "{tmp}/base"],
     "BASELINE: {tmp}/empty_run/results.csv has no result rows (meta.json: the run is failed)"),
    ("nccl-tests log of a failed run", ["report", "{fixtures}/nccl2.8.4_failed_before_rows.txt"],
     "RUN: {fixtures}/nccl2.8.4_failed_before_rows.txt: no result lines; the log says: "
     "Test NCCL failure common.cu:777 'unhandled system error'"),
    ("nccl-tests log that names no op", ["report", "{fixtures}/tag_output_p5_fragment_no_ranks.txt"],
     "RUN: {fixtures}/tag_output_p5_fragment_no_ranks.txt: cannot tell which collective ran (no op name in the log "
     "or the file name, and busbw/algbw, redop and root do not say); pass --op"),
    ("nccl-tests log that does not say its ranks",
     ["report", "{fixtures}/tag_output_p5_fragment_no_ranks.txt", "--op", "all_reduce"],
     "RUN: {fixtures}/tag_output_p5_fragment_no_ranks.txt: cannot tell how many ranks ran all_reduce "
     "(no '# Rank' lines, and neither size/count nor busbw/algbw says); pass --ranks"),
    ("unknown --op hint", ["report", "{tmp}/base", "--op", "bogus"],
     f"--op: unknown collective 'bogus'; choose from {', '.join(OP_NAMES)} or all"),
    ("--ranks hint below 1", ["compare", "{tmp}/base", "{tmp}/base", "--ranks", "0"],
     "--ranks: must be at least 1, got 0"),
    # Names, numbers and sizes: what no run could have written, or a file read whole, is refused.
    ("baseline name ending in a newline", ["sweep", "--sizes", "1K", "--save-baseline", "nl\n"],
     "--save-baseline: 'nl\\n' is not a baseline name; use letters, digits, '.', '_' or '-'"),
    ("baseline name too long to save", ["sweep", "--sizes", "1K", "--save-baseline", "b" * 250],
     "--save-baseline: a baseline name is at most 200 characters, got 250"),
    ("infinite timeout", ["sweep", "--timeout", "inf"], "--timeout: expected a finite number, got inf"),
    ("timeout beyond a float", ["sweep", "--timeout", "1e400"], "--timeout: expected a finite number, got inf"),
    ("infinite peak", ["sweep", "--peak", "inf"], "--peak: expected a finite number, got inf"),
    ("infinite doctor floor", ["doctor", "--expect", "inf"], "--expect: expected a finite number, got inf"),
    ("preset that is a FIFO", ["sweep", "--config", "{tmp}/fifo.toml"],
     "--config: cannot read {tmp}/fifo.toml: not a regular file"),
    ("preset that is a device", ["sweep", "--config", "/dev/zero"],
     "--config: cannot read /dev/zero: not a regular file"),
    ("preset too large to be one", ["sweep", "--config", "{tmp}/big.toml"],
     "--config: cannot read {tmp}/big.toml: 2,097,152 bytes, more than the 1,048,576 it may have"),
    ("infinite size in a CSV", ["report", "{tmp}/inf_size"],
     "RUN: {tmp}/inf_size/results.csv line 2: size_bytes: expected a whole number, got 'inf'"),
    ("negative size in a CSV", ["report", "{tmp}/negative_size"],
     "RUN: {tmp}/negative_size/results.csv line 2: size_bytes: must be at least 0, got -1024"),
    ("file with an endless line", ["report", "{tmp}/one_line.log"],
     "RUN: {tmp}/one_line.log line 1 is longer than 1,048,576 characters; not a results CSV or an nccl-tests log"),
    ("repeated header line", ["report", "{tmp}/joined.csv"],
     "RUN: {tmp}/joined.csv line 3 repeats the header line (files joined?); keep one header"),
    # Text from files: a name that is not one, a control character or a formula never reaches an output.
    ("HTML as a dtype (compare --markdown)", ["compare", "{tmp}/html_dtype", "{tmp}/base", "--markdown", "{tmp}/s.md"],
     "BASELINE: {tmp}/html_dtype/results.csv line 2: dtype: '<img src=x onerror=alert(1)>' is not a name "
     "(letters, digits, '_', '.', '-')"),
    ("escape sequence in flags", ["report", "{tmp}/escape_flags"],
     "RUN: {tmp}/escape_flags/results.csv line 2: flags: 'noisy\\x1b[2J' holds a control character or begins "
     "like a spreadsheet formula"),
    ("spreadsheet formula in flags", ["report", "{tmp}/formula_flags", "--format", "csv"],
     "RUN: {tmp}/formula_flags/results.csv line 2: flags: '=HYPERLINK(1)' holds a control character or begins "
     "like a spreadsheet formula"),
    ("doctor run in a format of result rows", ["report", "{tmp}/doctor_run", "--format", "csv"],
     "--format: {tmp}/doctor_run is a doctor run (doctor.json, no result rows); only the table format and --html "
     "show it"),
    ("results folder that is a file", ["sweep", "--sizes", "1K", "--out", "afile"],
     "--out: afile is a file, not a folder"),
    ("results folder that is a dangling link", ["sweep", "--sizes", "1K", "--out", "link"],
     "--out: link is a symbolic link to {tmp}/gone, which does not exist"),
    ("column given twice in a CSV", ["report", "{tmp}/twice"],
     "RUN: {tmp}/twice/results.csv has the column busbw_gbps more than once; which copy holds the values cannot "
     "be told"),
    ("key given twice in a JSON object", ["report", "{tmp}/twice.json"],
     "RUN: {tmp}/twice.json: the key 'busbw_gbps' appears more than once in one object; which copy holds the "
     "value cannot be told"),
    ("doctor with nothing to measure", ["doctor", "--workers", "1"],
     "--workers: 1 rank(s) on 1 host(s) leave the doctor nothing to measure: the nodes phase needs a host with 2 or "
     "more ranks and the pairs phase needs 2 or more hosts"),
    ("doctor pairs on one host", ["doctor", "--workers", "2", "--phase", "pairs"],
     "--phase: 2 rank(s) on 1 host(s) leave the doctor nothing to measure: the pairs phase needs 2 or more hosts"),
    ("history of an unknown kind", ["history", "show", "--history", "mysql://db/x"],
     "--history: 'mysql://db/x': unknown scheme; give a file path, sqlite:///PATH or postgresql://USER@HOST:PORT/DB"),
    ("history URL on a sweep", ["sweep", "--sizes", "1K", "--history", "sqlite:/x"],
     "--history: 'sqlite:/x': write sqlite:///relative/path or sqlite:////absolute/path"),
    ("history that does not exist", ["history", "check", "--history", "{tmp}/none.sqlite"],
     "--history: {tmp}/none.sqlite does not exist; record a run first"),
    ("history of a newer nccl-bench", ["history", "show", "--history", "{tmp}/newer.sqlite"],
     "--history: {tmp}/newer.sqlite was written by a newer nccl-bench (store schema 99; this one reads up to 4): "
     "upgrade nccl-bench"),
    ("history window below 3", ["history", "check", "--window", "1"], "--window: must be at least 3, got 1"),
    # The history: what was named is no history at all (exit 2), its password never shown.
    ("history that is a folder", ["history", "show", "--history", "{tmp}/dir.sqlite"],
     "--history: {tmp}/dir.sqlite is a folder, not a history file"),
    ("history that is another program's database", ["history", "add", "{tmp}/base", "--history", "{tmp}/other.sqlite"],
     "--history: {tmp}/other.sqlite is not an nccl-bench history (it holds other tables: accounts)"),
    ("history that is not a database", ["history", "nodes", "--history", "{tmp}/text.sqlite"],
     "--history: {tmp}/text.sqlite: not an SQLite file, so not a history"),
    ("history as a keyword string libpq cannot read", ["history", "show", "--history", "host=db password=X pass word"],
     "--history: 'host=db password=*** pass word' is not a libpq keyword string (key=value ..., a value with spaces in "
     "single quotes); or write postgresql://USER@HOST:PORT/DB"),
    ("history option libpq does not know", ["history", "show", "--history", "host=/nowhere dbname=x bogus=1"],
     "--history: host=/nowhere dbname=x bogus=1: not a PostgreSQL address libpq reads (invalid connection option "
     "\"bogus\")"),
    ("history server without a scheme", ["sweep", "--sizes", "1K", "--history", "ci:X@db:5432/bench"],
     "--history: 'ci:***@db:5432/bench' looks like a server without a scheme; write postgresql://ci:***@db:5432/bench"),
    ("history URL with a newline", ["history", "check", "--history", "a\nb.sqlite"],
     "--history: 'a\\nb.sqlite' holds a control character; give a file path, sqlite:///PATH or "
     "postgresql://USER@HOST:PORT/DB"),
    ("history wait not positive", ["history", "show", "--history-wait", "0"],
     "--history-wait: must be greater than 0, got 0.0"),
    ("history add of an impossible busbw", ["history", "add", "{tmp}/huge_busbw"],
     "{tmp}/huge_busbw: busbw_gbps 1e+308 of all_reduce in_place 1048576 float is not a measurement (a finite number "
     "from 0 to 1e+06); the run is not stored"),
    # --nccl-env never touches what the tool sets for its ranks; every refusal before measuring.
    ("--nccl-env of the run's claim", ["sweep", "--nccl-env", "NCCL_BENCH_RUN_CLAIM=x", "--sizes", "1K"],
     "--nccl-env: NCCL_BENCH_RUN_CLAIM is nccl-bench's own (NCCL_BENCH_* are set by the tool for its ranks), not an "
     "NCCL setting; drop it"),
    ("--nccl-env of the ranks' parent", ["sweep", "--nccl-env", "NCCL_BENCH_PARENT_PID=1", "--sizes", "1K"],
     "--nccl-env: NCCL_BENCH_PARENT_PID is nccl-bench's own (NCCL_BENCH_* are set by the tool for its ranks), not an "
     "NCCL setting; drop it"),
    ("--nccl-env of --nccl-trace's variable",
     ["sweep", "--nccl-trace", "--nccl-env", "NCCL_DEBUG_FILE=x", "--sizes", "1K"],
     "--nccl-env: NCCL_DEBUG_FILE is set by --nccl-trace to read NCCL's tuning log; drop one of the two"),
    ("--baseline of other --nccl-env settings",
     ["sweep", "--nccl-env", "NCCL_ALGO=Ring", "--baseline", "{tmp}/base", "--op", "all_reduce", "--sizes", "1M",
      "--workers", "2"],
     "--baseline {tmp}/base: was measured with no --nccl-env, this sweep would run with NCCL_ALGO=Ring; rows compare "
     "only under the same settings: give the baseline's --nccl-env"),
    ("trace whose groups outgrow the launch", ["replay", "{traces}/nccl_128rank_rank0.json.gz", "--workers", "2"],
     "{traces}/nccl_128rank_rank0.json.gz: its all_to_all runs on a group of 128 ranks: needs 128 ranks; this "
     "launch has 2"),
    ("trace without collectives", ["replay", "{tmp}/idle.json", "--workers", "2"],
     "{tmp}/idle.json: no collectives in it: no record_param_comms with a collective name, no nccl:* or gloo:* "
     "annotation"),
    ("trace cut short", ["replay", "{tmp}/cut.json.gz"],
     "{tmp}/cut.json.gz: its gzip data is cut short or damaged (EOFError)"),
    ("JSON that is no trace", ["replay", "{tmp}/twice.json"],
     "{tmp}/twice.json: not a trace: its JSON object has no traceEvents array"),
    ("a replay's run as the envelope", ["replay", "{traces}/torch211_nccl2289_1gpu_rank0.json.gz", "--envelope",
                                        "{tmp}/replayed"],
     "--envelope: {tmp}/replayed is a replay's run (trace:rank0.json), not a sweep: give the run of a sweep of this "
     "fabric (nccl-bench sweep)"),
]

# Under a launcher's rank layout (environment variables), still before any process group.
LAUNCHER = [
    ("rank layout without MASTER_ADDR", {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}, ["sweep", "--sizes", "1K"],
     "MASTER_ADDR: must be set when RANK and WORLD_SIZE are (torchrun sets all three; without it, "
     "export MASTER_ADDR=<rank 0's host> and MASTER_PORT)"),
    ("Slurm layout without MASTER_ADDR", {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"},
     ["sweep", "--sizes", "1K"], "MASTER_ADDR: must be set when launching with slurm (e.g. the first node's hostname)"),
    ("--workers under a launcher", {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"},
     ["sweep", "--workers", "2", "--sizes", "1K"],
     "--workers: only applies without a launcher; torchrun already started 1 rank(s)"),
    ("--nccl-env under a launcher", {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"},
     ["sweep", "--nccl-env", "NCCL_ALGO=Ring", "--nccl-env", "NCCL_ALGO=allreduce:tree;allgather:^tree",
      "--sizes", "1K"],
     "--nccl-env: needs fresh ranks for each variant, and torchrun started these once; loop in the shell instead: "
     "for v0 in Ring 'allreduce:tree;allgather:^tree'; do NCCL_ALGO=\"$v0\" torchrun ... nccl-bench sweep ... "
     "(without --nccl-env); done;"),
    ("rank outside its world", {"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, ["sweep", "--sizes", "1K"],
     "RANK: 2 is not a rank of a world of 2 (0 to 1)"),
    ("port that is not a number", {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "abc"},
     ["sweep", "--sizes", "1K"], "MASTER_PORT: expected a TCP port from 1 to 65535, got 'abc'"),
]

# Messages that carry numbers of this machine or library wording: matched as patterns.
PATTERN = [
    ("a replay beyond free memory", ["replay", "{tmp}/huge.json", "--workers", "2"],
     r"TRACE\.\.\.: the replay needs [\d,]+ MiB of host memory \(2 rank\(s\) x [\d,]+ MiB\) \+ [\d,]+ MiB kept free "
     r"for torch, NCCL and the OS \(10% of it\) = [\d,]+ MiB, but only [\d,]+ MiB is available; its buffers are the "
     r"traces' largest collective: free memory, or replay where there is more"),
    ("sizes beyond free memory", ["sweep", "--sizes", "1K,1T", "--workers", "2"],
     r"--sizes: the sweep needs [\d,]+ MiB of host memory \(2 rank\(s\) x [\d,]+ MiB\) \+ [\d,]+ MiB kept free for "
     r"torch, NCCL and the OS \(10% of it\) = [\d,]+ MiB, but only [\d,]+ MiB is available; lower --sizes"),
    ("backend not built into torch", ["sweep", "--backend", "mpi", "--workers", "2", "--sizes", "1K"],
     r"--backend: this torch \(\S+\) was built without mpi; use gloo"),
    ("malformed config", ["sweep", "--config", "{tmp}/malformed.toml"],
     r"--config: \S+/malformed\.toml is not valid TOML: .+"),
    ("unknown option", ["sweep", "--bogus"], r"No such option: --bogus.*"),
    ("not a number", ["sweep", "--warmup", "x"], r"Invalid value for '-w' / '--warmup': .+"),
    ("workers beyond host memory", ["sweep", "--workers", "10000", "--sizes", "1K"],
     r"--workers: the sweep needs [\d,]+ MiB of host memory \(10000 rank\(s\) x [\d,]+ MiB\) \+ [\d,]+ MiB kept "
     r"free for torch, NCCL and the OS \(10% of it\) = [\d,]+ MiB, but only [\d,]+ MiB is available; lower --workers"),
]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "unknown.toml").write_text('ops = "all_reduce"\nbogus = 3\n')
    (tmp_path / "badvalue.toml").write_text('warmup = "x"\n')
    (tmp_path / "malformed.toml").write_text("ops = [\n")
    (tmp_path / "foreign.csv").write_text("a,b\n1,2\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "results.csv").write_text("precious\n")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / ".claim").write_text("pid 1 on nodea, 0123abcd")  # another run's, started at once
    (tmp_path / "afile").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    write_run(tmp_path / "base", [row(dtype="float32")])  # all_reduce, in_place, 1 MiB float32, 2 gloo ranks
    write_run(tmp_path / "replayed", [row(dtype="float32", source="trace:rank0.json")])  # a replay's run
    write_run(tmp_path / "results" / "baselines" / "main", [row()])
    (tmp_path / "header_only").mkdir()
    (tmp_path / "header_only" / "results.csv").write_text(",".join(COLUMNS) + "\n")
    (tmp_path / "empty_run").mkdir()
    write_meta(tmp_path / "empty_run", {"status": "failed"})
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "big.toml").write_text("#" * 2**21)
    write_trace(tmp_path / "huge.json", [collective(nelems=10**12)])  # 4 TB buffers: beyond any host's memory
    (tmp_path / "one_line.log").write_text("x" * 3 * 2**20)  # 3 MiB and no newline: read in bounded pieces
    for folder, column, value in (
        ("inf_size", "size_bytes", "inf"), ("negative_size", "size_bytes", "-1024"),
        ("html_dtype", "dtype", "<img src=x onerror=alert(1)>"), ("escape_flags", "flags", "noisy\x1b[2J"),
        ("formula_flags", "flags", "=HYPERLINK(1)"),
    ):
        _poisoned_run(tmp_path / folder, column, value)
    text = (tmp_path / "base" / "results.csv").read_text()
    (tmp_path / "joined.csv").write_text(text + text)
    _doctor_run(tmp_path / "doctor_run")
    write_run(tmp_path / "twice", [row()])
    header, line = (tmp_path / "twice" / "results.csv").read_text().splitlines()
    (tmp_path / "twice" / "results.csv").write_text(f"{header},busbw_gbps\n{line},999\n")
    (tmp_path / "twice.json").write_text('{"format": "nccl_bench.results", "schema_version": 2, "rows": '
                                         '[{"busbw_gbps": 1, "busbw_gbps": 999}]}')
    _newer_store(tmp_path / "newer.sqlite")
    (tmp_path / "idle.json").write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, '
                                        '"dur": 2}]}')
    (tmp_path / "cut.json.gz").write_bytes((TRACES / "nccl_2gpu_rank0.json.gz").read_bytes()[:4096])
    (tmp_path / "dir.sqlite").mkdir()
    (tmp_path / "text.sqlite").write_text("not a database, " * 100)
    _foreign_database(tmp_path / "other.sqlite")
    _poisoned_run(tmp_path / "huge_busbw", "busbw_gbps", "1e308")
    return tmp_path


def _newer_store(path: Path) -> None:
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE store_info (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        connection.execute("INSERT INTO store_info VALUES ('schema_version', '99')")
    connection.close()


def _foreign_database(path: Path) -> None:
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE accounts (name TEXT)")
    connection.close()


def _poisoned_run(folder: Path, column: str, value: str) -> None:
    """A run folder whose one row has `value` in `column`, as a hand-edited or hostile file would."""
    write_run(folder, [row()])
    header, line = (folder / "results.csv").read_text().splitlines()
    cells = dict(zip(header.split(","), line.split(","), strict=True))
    cells[column] = value
    (folder / "results.csv").write_text(header + "\n" + ",".join(cells.values()) + "\n")


def _doctor_run(folder: Path) -> None:
    from nccl_bench.doctor.doctor_report import DoctorReport, report_json
    from tests.helpers.doctor_reports import three_node_header, three_node_judgement

    folder.mkdir()
    report = DoctorReport(run_dir=folder, header=three_node_header(), judgement=three_node_judgement(), wall_s=4.0)
    (folder / "doctor.json").write_text(json.dumps(report_json(report)))
    write_meta(folder, {"status": "complete"})



@pytest.mark.parametrize("case, args, message", EXACT, ids=[c[0] for c in EXACT])
def test_exact_message(files, case, args, message):
    args = [a.format(tmp=files, fixtures=FIXTURES, traces=TRACES) for a in args]
    assert _one_error_line(_run(files, *args)) == message.format(tmp=files, fixtures=FIXTURES, traces=TRACES)


@pytest.mark.parametrize("env, message", [
    ({"NCCL_DEBUG_FILE": "/tmp/nccl.log"}, "--nccl-trace: writes NCCL's log to a file of each rank's own, and "
     "NCCL_DEBUG_FILE=/tmp/nccl.log is set; unset it (the trace keeps rank 0's log in the run folder)"),
    ({"NCCL_DEBUG": "WARN"}, "--nccl-trace: needs NCCL_DEBUG=INFO (its tuning lines are INFO lines), and "
     "NCCL_DEBUG=WARN is set; unset it"),
])
def test_nccl_trace_refuses_the_users_debug_settings_it_cannot_keep(files, env, message):
    assert _one_error_line(_run(files, "sweep", "--nccl-trace", "--sizes", "1K", "--workers", "2", env=env)) == message
    assert sorted(p.name for p in (files / "results").iterdir()) == ["baselines"]  # refused before any run folder


@pytest.mark.parametrize("case, env, args, message", LAUNCHER, ids=[c[0] for c in LAUNCHER])
def test_exact_message_under_a_launcher_layout(files, case, env, args, message):
    assert _one_error_line(_run(files, *args, env=env)) == message
    assert sorted(p.name for p in files.iterdir() if p.name.startswith("results")) == ["results"]  # no run folder


def test_a_results_disk_without_room_is_refused_before_measuring(files):
    with small_disk(files / "disk", 256 * 1024) as disk:
        message = _one_error_line(_run(files, "sweep", "--sizes", "1K", "--out", str(disk / "run")))
        assert re.fullmatch(rf"--out: no space left on {re.escape(str(disk / 'run'))}: [\d,]+ bytes free, "
                            r"a run needs at least 1,048,576", message), message
        assert not (disk / "run").exists()


@pytest.mark.parametrize("option", ["--cuda-graph", "--blocking"])
def test_gpu_only_options_are_refused_on_cpu(files, option):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA GPU, where the option is valid")
    args = [option, "4"] if option == "--cuda-graph" else [option]
    message = _one_error_line(_run(files, "sweep", *args, "--sizes", "1K", "--workers", "2"))
    assert message == f"{option}: only applies on GPUs (NCCL); this run uses gloo on CPU"


@pytest.mark.parametrize("case, args, pattern", PATTERN, ids=[c[0] for c in PATTERN])
def test_message_pattern(files, case, args, pattern):
    args = [a.format(tmp=files) for a in args]
    assert re.fullmatch(pattern, _one_error_line(_run(files, *args)))


def test_nccl_backend_without_gpu(files):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA GPU, so --backend nccl is valid here")
    # a fresh interpreter: one refusal that imports torch, seen exactly as a user starts it
    message = _one_error_line(_run_fresh(files, "sweep", "--backend", "nccl", "--workers", "2", "--sizes", "1K"))
    assert message == "--backend: nccl needs CUDA GPUs, and none is available here; use gloo"


def test_existing_results_are_left_untouched(files):
    _one_error_line(_run(files, "sweep", "--sizes", "1K", "--out", str(files / "full")))
    assert (files / "full" / "results.csv").read_text() == "precious\n"
    assert sorted(p.name for p in (files / "full").iterdir()) == ["results.csv"]


def test_a_deleted_working_folder_is_one_line_before_torch_loads(tmp_path):
    """torch, loaded from a working folder that is gone, would end the process with oneMKL's "Cannot load"."""
    gone = tmp_path / "gone"
    gone.mkdir()
    result = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m nccl_bench "$@"',
                             sys.executable, "sweep", "--workers", "2", "--sizes", "1K"],
                            capture_output=True, text=True, timeout=60,
                            env=worker_env({"PYTHONPATH": str(REPO)}))  # no empty entry: it would name the cwd
    assert _one_error_line(result) == ("the working folder cannot be read (No such file or directory: deleted or "
                                       "unmounted?); cd to an existing folder and run again")


@pytest.mark.parametrize("command", [["sweep", "--workers", "2", "--sizes", "1K"], ["doctor", "--workers", "2"]])
def test_too_few_open_files_is_one_line_before_anything_starts(tmp_path, command):
    """With ulimit -n 20 the launcher's store failed with EMFILE in a 77-line traceback."""
    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (20, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    result = subprocess.run([sys.executable, "-m", "nccl_bench", *command], cwd=tmp_path, env=worker_env(),
                            capture_output=True, text=True, timeout=60, preexec_fn=few_files)
    assert _one_error_line(result) == ("ulimit -n: 20 open files per process is below the 32 a run needs to start; "
                                       "raise it (ulimit -n 4096)")
    assert list(tmp_path.iterdir()) == []  # no run folder made


def test_too_little_address_space_is_one_line_before_torch_loads(tmp_path):
    """Below ~700 MiB OpenBLAS gives up inside `import torch`, saying only that an allocation failed."""
    result = run_fresh(["sweep", "--workers", "2", "--sizes", "1K"], cwd=tmp_path, env=worker_env(),
                       address_space=500 * 2**20)
    assert _one_error_line(result) == ("ulimit -v: an address space of 500 MiB is below the 900 MiB torch needs to "
                                       "load; raise it (ulimit -v unlimited)")


def test_no_arguments_prints_help_and_exits_2(tmp_path):
    result = _run(tmp_path)
    assert result.returncode == 2
    assert "Usage" in result.stdout and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [
    ["sweep", "--help"], ["sweep", "--warmup", "x"], ["sweep", "--bogus"], ["report", "--help"],
])
def test_help_and_argument_errors_import_no_pydantic(tmp_path, args):
    # typer >= 0.29 would build a pydantic converter for every parameter (~0.1 s of imports)
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "nccl_bench", *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env=worker_env())
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert imported & {"pydantic", "torch", "pandas"} == set()


# -- the history: unusable now (exit 3), every wait bounded and said, never a traceback or a password --------
WAITING = "nccl-bench: waiting for the history "


def _store_error(result: subprocess.CompletedProcess, code: int = 3) -> str:
    """The one error line (a note that the command waited may come before it), and its exit code."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith(WAITING)]
    assert len(lines) == 1 and lines[0].startswith(ERROR), result.stderr
    return lines[0][len(ERROR):]


def _history_of_one_run(folder: Path) -> Path:
    from tests.helpers.history_runs import sweep_run
    from tests.helpers.history_stores import sqlite_store_with_run

    folder.mkdir(parents=True, exist_ok=True)
    return sqlite_store_with_run(folder / "h.sqlite", sweep_run(folder / "run", 1))


@pytest.mark.parametrize("command", [["show"], ["check"], ["nodes"], ["html", "p.html"],
                                     ["add", "{tmp}/base"]])
def test_a_history_missing_a_table_is_one_line_and_exit_3(tmp_path, command):
    import sqlite3

    store = _history_of_one_run(tmp_path)
    with sqlite3.connect(store) as connection:
        connection.execute("DROP TABLE runs")
    connection.close()
    write_run(tmp_path / "base", [row()])
    args = ["history", *[a.format(tmp=tmp_path) for a in command], "--history", str(store)]
    assert _store_error(_run(tmp_path, *args)).startswith(f"--history: {store} is damaged: no table runs (a history "
                                                          "has store_info, runs, ")


def test_a_history_in_a_read_only_folder_is_read_and_refuses_writes_in_one_line(tmp_path):
    from tests.helpers.history_stores import read_only_folder

    store = _history_of_one_run(tmp_path / "store")
    write_run(tmp_path / "base", [row()])
    with read_only_folder(tmp_path / "store"):
        shown = _run(tmp_path, "history", "show", "--json", "--history", str(store))
        assert shown.returncode == 0 and json.loads(shown.stdout)["runs"] == 1, shown.stderr
        assert _store_error(_run(tmp_path, "history", "add", str(tmp_path / "base"), "--history", str(store))) == (
            f"--history: {store}: cannot be opened (its folder {tmp_path / 'store'} cannot be written, and SQLite "
            "writes its journal there)")


@pytest.mark.parametrize("command", [["show"], ["add", "{tmp}/base"]])
def test_a_locked_sqlite_history_is_waited_for_said_then_exit_3(tmp_path, command):
    """A rollback-journal store under another writer's exclusive lock: readers wait too."""
    import sqlite3
    import time

    store = _history_of_one_run(tmp_path)
    write_run(tmp_path / "base", [row()])
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        done = _run(tmp_path, "history", *[a.format(tmp=tmp_path) for a in command], "--history", str(store),
                    "--history-wait", "3")
        assert time.monotonic() - started < 60
    finally:
        holder.close()
    assert _store_error(done) == (f"--history: {store}: locked by another writer; gave up after 3 s (--history-wait "
                                  "sets how long)")
    assert done.stderr.startswith(f"{WAITING}{store}: locked by another writer, or busy (at most 3 s; "
                                  "--history-wait sets it)\n")


@contextlib.contextmanager
def _locked_history(tmp_path: Path, kind: str, request):
    """A history of one run under another connection's lock for the block: its URL."""
    if kind == "sqlite":
        import sqlite3

        store = _history_of_one_run(tmp_path)
        holder = sqlite3.connect(store, isolation_level=None)
        holder.execute("PRAGMA journal_mode = DELETE")
        holder.execute("BEGIN EXCLUSIVE")
        try:
            yield str(store)
        finally:
            holder.close()
        return
    import psycopg

    url = request.getfixturevalue("postgres_server").new_database()
    write_run(tmp_path / "one", [row()])
    assert _run(tmp_path, "history", "add", str(tmp_path / "one"), "--history", url).returncode == 0
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE runs, results, doctor_hosts")
        yield url
        holder.rollback()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("signum", [2, 15])
def test_ctrl_c_or_sigterm_while_waiting_for_the_history_ends_at_once(tmp_path, signum, kind, request):
    import signal
    import time

    with _locked_history(tmp_path, kind, request) as url:
        command = [sys.executable, "-m", "nccl_bench", "history", "show", "--history", url, "--history-wait", "300"]
        process = subprocess.Popen(command, cwd=tmp_path, env=worker_env(), stderr=subprocess.PIPE, text=True)
        assert process.stderr.readline().startswith(WAITING)  # it waits, and says so
        sent = time.monotonic()
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        assert time.monotonic() - sent < 30
    assert process.returncode == 130
    assert stderr == f"nccl-bench: error: interrupted by {signal.Signals(signum).name}\n"


def test_a_postgresql_lock_is_waited_for_said_then_exit_3(tmp_path, postgres_server):
    import psycopg

    url = postgres_server.new_database()
    write_run(tmp_path / "base", [row()])
    assert _run(tmp_path, "history", "add", str(tmp_path / "base"), "--history", url).returncode == 0
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE runs, results, doctor_hosts")  # every reader and writer of them waits
        for command in (["nodes"], ["add", str(tmp_path / "base")]):
            done = _run(tmp_path, "history", *command, "--history", url, "--history-wait", "3")
            assert _store_error(done) == (f"--history: {url}: locked by another writer; gave up after 3 s "
                                          "(--history-wait sets how long)"), command
        holder.rollback()


def test_an_unreachable_or_silent_postgresql_server_is_one_line_and_exit_3(tmp_path):
    from tests.helpers.history_stores import silent_server

    gone = "postgresql://ci@/bench?host=/nonexistent-socket-dir"
    assert _store_error(_run(tmp_path, "history", "show", "--history", gone)).startswith(
        f"--history: {gone}: the server cannot be reached or closed the connection (")
    with silent_server() as port:
        silent = f"postgresql://ci:SECRET@127.0.0.1:{port}/bench"
        done = _run(tmp_path, "history", "check", "--history", silent, "--history-wait", "2")
    assert _store_error(done) == (f"--history: postgresql://ci:***@127.0.0.1:{port}/bench: no answer from the "
                                  "server; gave up after 2 s (--history-wait sets how long)")
    assert "SECRET" not in done.stderr


def test_a_refused_postgresql_password_is_said_as_such_and_exit_3(tmp_path, postgres_server):
    role = f"ci_{os.getpid()}"
    url = postgres_server.password_role(role, "Tops3cret")
    wrong = url.replace(f"//{role}@", f"//{role}:Wr0ng%25pw@")
    for given, said in ((wrong, f'password authentication failed for user "{role}"'), (url, "no password supplied")):
        done = _run(tmp_path, "history", "show", "--history", given)
        message = _store_error(done)
        assert "the server refused the credentials (" in message and said in message, message
        assert message.endswith("): check the user and password (the URL, PGPASSWORD or ~/.pgpass)")
        assert "cannot be reached" not in message and "Wr0ng" not in done.stderr


def test_a_postgresql_server_stopped_during_add_is_one_line_and_exit_3(tmp_path):
    """A server of the test's own, stopped while `history add` of 1,000 runs goes on."""
    import shutil
    import tempfile

    from tests.helpers.history_runs import sweep_run
    from tests.helpers.history_stores import PostgresServer, why_no_postgres

    if why_no_postgres() is not None:
        pytest.skip(why_no_postgres())
    runs = [str(sweep_run(tmp_path / f"r{day}", day % 28 + 1, 1 + day / 1000)) for day in range(1000)]
    folder = Path(tempfile.mkdtemp(prefix="nccl-bench-pg-stop-"))
    server = PostgresServer(folder)
    try:
        url = server.new_database()
        process = subprocess.Popen([sys.executable, "-m", "nccl_bench", "history", "add", *runs, "--history", url],
                                   cwd=tmp_path, env=worker_env(), stderr=subprocess.PIPE, text=True)
        lines = [process.stderr.readline() for _ in range(5)]
        assert all(line.startswith("added: ") for line in lines), "".join(lines)[-2000:]
        server.stop()
        rest = process.communicate(timeout=120)[1]
    finally:
        server.stop_quietly()
        shutil.rmtree(folder, ignore_errors=True)
    assert process.returncode == 3, rest[-2000:]
    assert "Traceback" not in rest
    last = rest.splitlines()[-1]
    assert last.startswith(f"{ERROR}--history: {url}: the server cannot be reached or closed the connection ("), last
    assert all(line.startswith(("added: ", "already stored: ")) for line in rest.splitlines()[:-1]), rest[-2000:]


def test_history_add_skips_inputs_that_are_not_runs_and_adds_the_rest(files):
    store = files / "results" / "history.sqlite"
    done = _run(files, "history", "add", str(files / "base"), str(files / "afile"), str(files / "huge_busbw"),
                "--history", str(store))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"nccl-bench: skipped {files / 'afile'}: ")
    assert lines[1].startswith(f"nccl-bench: skipped {files / 'huge_busbw'}: busbw_gbps 1e+308 of ")
    assert lines[2].startswith(f"added: {files / 'base'} (run ") and len(lines) == 3
    again = _run(files, "history", "add", *(str(p) for p in sorted((files / "results").iterdir())), str(files / "base"),
                 "--history", str(store))  # `history add results/*`, the history itself among them
    assert again.returncode == 0, again.stderr
    assert [line for line in again.stderr.splitlines() if line.startswith(f"nccl-bench: skipped {store}: ")]
    assert again.stderr.splitlines()[-1].startswith(f"already stored: {files / 'base'} (run ")
    nothing = _run(files, "history", "add", str(files / "afile"), str(files / "text.sqlite"))
    assert nothing.returncode == 2
    assert nothing.stderr.splitlines()[-1] == f"{ERROR}PATH...: none of the 2 inputs is a run; nothing added"


def _no_constants(name: str):
    raise AssertionError(f"{name} is not JSON")


def test_show_json_stays_strict_over_a_history_holding_inf_and_nan(tmp_path, store_url):
    from nccl_bench.history.address import parse_address
    from nccl_bench.history.records import read_record
    from nccl_bench.history.store import open_store
    from tests.helpers.history_runs import sweep_run

    with open_store(parse_address(store_url)) as store:
        for day in (1, 2, 3):
            store.add_run(read_record(sweep_run(tmp_path / f"r{day}", day), "RUN", ""))
        bad = ("'Infinity'", "'NaN'", "'-Infinity'") if store.postgres else ("9e999", "-9e999", "-1")
        run_ids = [row[0] for row in store.rows("SELECT run_id FROM runs ORDER BY started_utc")]
        for run_id, value in zip(run_ids * 2, bad, strict=False):  # written by hand, or by a tool that let them in
            store.execute(f"UPDATE results SET busbw_gbps = {value} WHERE run_id = ? AND series LIKE ?",
                          (run_id, "%1048576%"))
    for command in (["show", "--json"], ["nodes", "--json"]):
        done = _run(tmp_path, "history", *command, "--history", store_url)
        assert done.returncode == 0, done.stderr
        json.loads(done.stdout, parse_constant=_no_constants)
        assert done.stderr == (f"nccl-bench: note: {len(bad)} stored value(s) of {store_url} are not finite, "
                               "non-negative measurements; skipped\n")
    check = _run(tmp_path, "history", "check", "--history", store_url)
    assert "inf" not in check.stdout + check.stderr and "nan" not in (check.stdout + check.stderr).lower()


ALGORITHMS = "Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, in any case"


@pytest.mark.parametrize("command", [["sweep", "--sizes", "1K"], ["doctor", "--size", "1K"],
                                     ["replay", "{traces}/torch211_nccl2289_1gpu_rank0.json.gz"]])
@pytest.mark.parametrize("env,extra,message", [
    ({"NCCL_ALGO": "bogus"}, [], f"NCCL_ALGO: 'bogus' is not a name NCCL knows ({ALGORITHMS}); fix or unset it"),
    ({"NCCL_PROTO": "allreduce:LL;alltoall:Simple"}, [], "NCCL_PROTO: 'alltoall' is not a collective NCCL knows "
     "(Broadcast, Reduce, AllGather, ReduceScatter, AllReduce); fix or unset it"),
])
def test_a_misspelt_nccl_choice_in_the_environment_is_one_line_before_any_run(files, command, env, extra, message):
    args = [a.format(traces=TRACES) for a in command]
    assert _one_error_line(_run(files, *args, "--workers", "2", *extra, env=env)) == message
    assert not (files / "results").exists() or sorted(p.name for p in (files / "results").iterdir()) in (
        [], ["baselines"])  # refused before any run folder


def test_a_misspelt_nccl_choice_in_nccl_env_is_one_line(files):
    assert _one_error_line(_run(files, "sweep", "--sizes", "1K", "--workers", "2", "--nccl-env", "NCCL_ALGO=Ring",
                                "--nccl-env", "NCCL_PROTO=bogus")) == (
        "--nccl-env: NCCL_PROTO=bogus: 'bogus' is not a name NCCL knows (LL, LL128, Simple, in any case)")


@pytest.mark.parametrize("command", [["sweep", "--sizes", "1K"], ["doctor", "--size", "1K"],
                                     ["replay", "{traces}/torch211_nccl2289_1gpu_rank0.json.gz"]])
def test_nccl_on_a_gpu_cuda_cannot_see_is_one_line_naming_the_cause(files, command):
    args = [a.format(traces=TRACES) for a in command]
    message = _one_error_line(_run(files, *args, "--backend", "nccl", "--workers", "2", env=hidden_h100_env()))
    assert message.startswith("--backend: nccl needs a GPU that CUDA can use: "
                              "1 GPU(s) (NVIDIA H100 80GB HBM3) listed by ")
    assert "CUDA_VISIBLE_DEVICES=7 names none of them (unset it, or name one by its index, 0, or its UUID)" in message
    assert not (files / "results").exists() or sorted(p.name for p in (files / "results").iterdir()) in (
        [], ["baselines"])  # refused before any run folder
