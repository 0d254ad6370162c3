"""Options declared once that no single config owns: those several commands share (backend, out, results
root, timeout, prom, tolerance, --json) and those of the commands that run no ranks (compare, report,
limits, the history's).

An option is one dataclass field (option_types.option): its flags, parser with the bounds, help and
default; validation, the error that names it, preset keys, defaults and the command line's help are read
from the field. The configs of the commands that run on ranks declare their own options on their fields
(sweep/sweep_config.py, doctor/doctor_config.py, replay/replay_config.py) and reuse these; the commands'
other dataclasses of options are cli/option_sets.py's. A help says its default through `{default}`,
filled in from the declared default, so the two cannot drift. Plain code without typer (cli/params.py
makes the typer parameters): `--help` imports this module, so importing it must stay cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import (
    Argument,
    Option,
    choice,
    expand_choices,
    number,
    path,
    percent,
    shown_size,
    size,
    switch,
    text,
    tolerance,
    whole,
)


def expand_ops(names, option: str = "--op") -> tuple[str, ...]:
    """Collective names that may repeat or hold commas (dashes read as underscores); 'all' means every one."""
    from nccl_bench.units.op_table import OP_NAMES

    return expand_choices(names, OP_NAMES, option, "collective", normalize=lambda part: part.replace("-", "_"))


# -- options that several commands share ----------------------------------------------------------
BACKENDS = ("auto", "nccl", "gloo", "mpi", "ucc")

BACKEND = Option("backend", ("--backend",), choice(*BACKENDS),
                 "{default} (default: nccl with CUDA, else gloo), nccl, gloo, mpi, ucc.", default="auto")
OUT = Option("out", ("--out",), path,
             "Results folder (default results/<UTC time>_{folder}/); must not hold results already.")
RESULTS_ROOT = Option("results_root", ("--results-root",), path,
                      "Parent of the default results folder (default {default}).", default=Path("results"),
                      show=lambda root: f"./{root}")
TIMEOUT = Option("timeout_s", ("--timeout",), number(),
                 "Seconds before a stalled {step} or rendezvous fails (default {default}).", default=300.0)
PROM = Option("prom", ("--prom",), path,
              "Also write the results as Prometheus metrics (text format) to FILE, replaced whole by a rename "
              "(for node_exporter's textfile collector).", metavar="FILE")
# A file the result is also written to, as JSON: compare's comparison, the doctor's verdicts.
JSON_FILE = Option("json_file", ("--json",), path, "Also write {what} to FILE.", metavar="FILE")


def _one_op(value: Any, option: str) -> str:
    names = expand_ops([value], option)
    if len(names) != 1:
        raise UserInputError(option, "give one collective")
    return names[0]


# What an nccl-tests log may not say (report and compare).
LOG_OP = Option("op", ("--op",), _one_op, "For an nccl-tests log that does not say which collective it ran.")
LOG_RANKS = Option("ranks", ("--ranks",), whole(1), "For an nccl-tests log that does not say how many ranks ran.")

# A run judged against a baseline: compare, and sweep --baseline.
TOLERANCE = Option("tolerance", ("--tolerance",), tolerance,
                   "Allowed loss before a row regresses, {default} (default) or 0.1.", default=0.10, show=percent)
ALLOW_MISMATCH = Option("allow_mismatch", ("--allow-mismatch",), switch,
                        "Compare even when the world size or backend differs.", default=False)


# -- compare's -------------------------------------------------------------------------------------
def _path(value: Any, name: str) -> Path:
    return Path(value)


def _paths(values: Any, name: str) -> list[Path]:
    return [Path(value) for value in values]


BASELINE_RUN = Argument("baseline", "BASELINE",
                        "Baseline: run folder, results.csv, nccl_bench JSON, nccl-tests log or -J JSON.", parse=_path)
CURRENT_RUN = Argument("current", "CURRENT", "Current run, in any of the same forms.", parse=_path)
LATENCY_BELOW = Option("min_bytes", ("--min-bytes",), size(),
                       "Sizes below this are latency-bound: judged on time, not busbw.", default=64 * 1024,
                       show=shown_size)
MARKDOWN = Option("markdown", ("--markdown",), path, "Also write a Markdown report to FILE.", metavar="FILE")
JUNIT = Option("junit", ("--junit",), path, "Also write JUnit XML (one testcase per row) to FILE.", metavar="FILE")


# -- report's ---------------------------------------------------------------------------------------
RUNS = Argument("runs", "RUN...", "Run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.",
                many=True, parse=_paths)
PLOT = Option("plot", ("--plot",), path,
              "Also draw busbw and small-message latency against size into FILE (.png, .svg or .pdf).",
              metavar="FILE")
# The names are render/formats.FORMATS' keys, checked there (render/ is above this module).
FORMAT = Option("fmt", ("--format",), text, "table, markdown, csv, json or nccl-tests.", default="table")
OUTPUT = Option("output", ("--output",), path, "Write the rendering to FILE instead of stdout.", metavar="FILE")
HTML = Option("html_file", ("--html",), path,
              "Also write one self-contained HTML page (tables, plots, compare verdict of two runs).",
              metavar="FILE.html")


# -- limits' ----------------------------------------------------------------------------------------
AS_JSON = Option("as_json", ("--json",), switch, "Print JSON instead of a table.", default=False)


# -- the history commands' -------------------------------------------------------------------------
HISTORY_PATHS = Argument("paths", "PATH...",
                         "Run folders, results.csv files, nccl-tests logs or -J JSON files to add to the history.",
                         many=True)
HISTORY_OP = Option("op", ("--op",), _one_op, "Only this collective's series.")
# Twenty nightly runs: enough for the spread of the runs to be known (the rule widens its band for
# fewer), few enough that the reference is this month's machine. The minimum is the rule's: three
# earlier runs (history/rule.py MIN_PRIOR_RUNS); a window of fewer could never judge a run.
WINDOW = Option("window", ("--window",), whole(3, 10_000),
                "Judge each run against up to this many passing runs before it, at least 3 (default {default}).",
                default=20)
# The smallest change worth a red check, not a band: the band is the series' own noise (history/rule.py),
# and this only keeps a series whose runs agree to 0.1% from flagging a 1% wobble. NCCL's regressions
# between versions are 5-30% (docs/history.md), so a few percent hides none of them.
FLOOR = Option("floor", ("--floor",), tolerance,
               "The smallest drop ever flagged, however quiet the series: {default} (default) or 0.05; "
               "a noisier series is judged by its own spread.", default=0.03, show=percent)
PAGE = Argument("page", "FILE", "The page to write: one self-contained HTML file.", parse=_path)

# -- the history's check --run, accept and diff -----------------------------------------------------------
RUN_ID_CHARS = 8  # the fewest leading characters of a run id that name it; the sweep prints twelve


def run_id(value: Any, option: str) -> str:
    """A run id or its first RUN_ID_CHARS+ characters (hex), as `recorded run ...` and check print it."""
    import re

    given = str(value).strip().lower()
    if not re.fullmatch(f"[0-9a-f]{{{RUN_ID_CHARS},64}}", given):
        raise UserInputError(option, f"{str(value)[:80]!r} is not a run id (the sweep prints it: `recorded run "
                                     f"1a2b3c4d5e6f in the history ...`; {RUN_ID_CHARS} or more of its characters)")
    return given


HISTORY_SYSTEM = Option("system", ("--system",), text,
                        "Only this system's series, as show names it ('NVIDIA H100 80GB HBM3 x8', 'cpu@nodea').",
                        metavar="SYSTEM")
JUDGE_RUN = Option("run", ("--run",), run_id,
                   "Judge this run (its id as the sweep prints it) in every series it has a value in, instead of "
                   "each series' latest; fails (exit 3) when the history does not hold it.", metavar="ID")
# read by run_id after --reason, which accept checks first
ACCEPT_RUN = Argument("run", "RUN", "The run (its id) that becomes the new normal of every series it has a value in.")
REASON = Option("reason", ("--reason",), text,
                "Why this run is the new normal (required): shown by check and on the page.", metavar="TEXT")
DIFF_BEFORE = Argument("before", "RUN_A", "The earlier run (its id).", parse=run_id)
DIFF_AFTER = Argument("after", "RUN_B", "The later run (its id): each series' change from RUN_A, and what changed.",
                      parse=run_id)


# -- the app's ---------------------------------------------------------------------------------------
VERSION = Option("version", ("--version",), switch, "Print the version and exit.", default=False)
HELP_FLAGS = ("-h", "--help")  # click's own help option, under the names every command answers to
