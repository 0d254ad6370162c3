"""Every option and argument of every command, declared once: its flags, its config key (the key a
preset file uses too), its parser with the bounds, its help and its default.

Validation, the error that names the option, preset keys, the defaults the configs start from and
the command line's help are all read from these declarations, so no option is spelled, bounded,
defaulted or described twice; options that several commands share with one meaning are one
declaration. A help says its default through `{default}`, filled in from the declared default, so
the two cannot drift (nccl_bench/option_types.py: what a declaration is, and the parsers). Plain
code without typer (cli/params.py turns a declaration into a typer parameter) and without the
configs' dataclasses: `--help` imports this module, so importing it must stay cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import (
    Argument,
    Option,
    PerDevice,
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
from nccl_bench.units import hostlist
from nccl_bench.units.sizes import parse_size

if TYPE_CHECKING:  # read on use: `--help` needs neither the op table nor the split's grammar
    from nccl_bench.units.split_spec import Split


def read_values(options: Iterable[Option], values: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """Each value read by the option with its key; a key that no option has is named (a preset's typo)."""
    by_key = {option.key: option for option in options}
    checked = {}
    for key, value in values.items():
        if key not in by_key:
            raise UserInputError(source or PRESET.name, f"unknown key {key!r}; known keys: {', '.join(by_key)}")
        checked[key] = by_key[key].read(value, source)
    return checked


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
CPU_WORKERS = 2  # the smallest world in which every collective really communicates
WORKERS = Option("workers", ("--workers",), whole(1),
                 "Without a launcher: start this many local ranks (default: {default}).",
                 default=PerDevice("one per GPU", CPU_WORKERS), show=lambda workers: f"{workers.gpu}, or "
                 f"{workers.cpu} on CPU")
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

# -- the sweep's options: SweepConfig's fields, in its order --------------------------------------
DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64")
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
AGGREGATIONS = ("max", "avg", "min")

# Upper bounds on numbers the user types, checked before anything is built from them, so no input
# makes the tool hold memory in proportion to a number (a list of a billion sizes, a timestamp per
# op for a billion ops). Each is far above what a real sweep uses: nccl-tests' -b 8 -e 1G -f 2 is
# 28 sizes, and a linear -i 1M sweep to 1G is 1,024.
MAX_SIZES = 10_000
MAX_ITERS = 1_000_000  # one timestamp per op per sample is kept for p50/p99
MAX_WARMUP = 1_000_000
MAX_TRIALS = 1_000
MAX_CUDA_GRAPH_OPS = 10_000  # ops captured in one CUDA graph: each holds GPU memory while captured
MAX_CYCLES = 1_000_000  # passes over the plan; 0 (until interrupted) is the way to ask for more

# Auto iterations: a timed sample lasts at least this long, so timer resolution, launch jitter and
# rank skew are small against it. CPU samples are longer because the host is shared and noisier.
MIN_SAMPLE_MS = PerDevice(gpu=50.0, cpu=200.0)


def _ops(value: Any, option: str) -> tuple[str, ...]:
    return expand_ops([value] if isinstance(value, str) else list(value), option)


def _sizes(value: Any, option: str) -> tuple[int, ...]:
    parts = value.split(",") if isinstance(value, str) else list(value)
    sizes = tuple(parse_size(p.strip() if isinstance(p, str) else p, option) for p in parts if str(p).strip())
    if not sizes:
        raise UserInputError(option, "no sizes given")
    if len(set(sizes)) > MAX_SIZES:
        raise UserInputError(option, f"{len(set(sizes)):,} sizes given; a sweep takes at most {MAX_SIZES:,}")
    return sizes


def _iters(value: Any, option: str) -> int | None:
    if value is None or str(value).lower() == "auto":
        return None
    return whole(1, MAX_ITERS)(value, option)


def _distribution(value: Any, option: str) -> str:
    from nccl_bench.units.alltoallv import parse_distribution

    try:
        return str(parse_distribution(value))
    except ValueError as exc:
        raise UserInputError(option, str(exc)) from None


def _split(value: Any, option: str) -> Split:
    from nccl_bench.units.split_spec import Split, parse_split

    if isinstance(value, Split):
        return value
    try:
        return parse_split(value)
    except ValueError as exc:
        raise UserInputError(option, str(exc)) from None


def _nccl_env(value: Any, option: str) -> tuple:
    from nccl_bench.units.nccl_env import parse_assignments

    texts = [value] if isinstance(value, str) else list(value)
    if texts and isinstance(texts[0], tuple):  # already read (a config's own value)
        return tuple(texts)
    try:
        return parse_assignments(texts)
    except ValueError as exc:
        raise UserInputError(option, str(exc)) from None


SWEEP_OPTIONS = (
    Option("ops", ("--op",), _ops,
           "Collective to run; repeat or comma-separate; 'all' for every one. See `nccl-bench ops`.",
           default="all_reduce", many=True),
    Option("min_bytes", ("-b", "--min-bytes"), size(), "Smallest size, e.g. 8, 1K, 1M (powers of 1024)."),
    Option("max_bytes", ("-e", "--max-bytes"), size(), "Largest size, e.g. 64M, 1G."),
    Option("step_factor", ("-f", "--step-factor"), number(above=1),
           "Geometric step between sizes (default {default}).", default=2.0),
    Option("step_bytes", ("-i", "--step-bytes"), size(), "Linear step between sizes instead of -f."),
    Option("sizes", ("--sizes",), _sizes, "Explicit sizes, e.g. 1K,1M,64M (instead of -b/-e)."),
    Option("dtype", ("-d", "--dtype"), choice(*DTYPES),
           "{default} (default), float16, bfloat16, float64, int8, uint8, int32, int64.", default="float32"),
    Option("reduce_op", ("-o", "--reduce-op"), choice(*REDUCE_OPS), "{default} (default), prod, min, max, avg.",
           default="sum"),
    Option("root", ("--root",), whole(0), "Root rank of broadcast, reduce, gather, scatter (default {default}).",
           default=0),
    Option("alltoallv", ("--alltoallv",), _distribution,
           "all_to_allv's per-peer shares: even, random[:SEED] (default {default}) or skewed[:HOT] "
           "(HOT peers get 80% of the data).", default="random:0", metavar="DIST"),
    Option("warmup", ("-w", "--warmup"), whole(0, MAX_WARMUP), "Untimed ops before each point (default {default}).",
           default=5),
    Option("iters", ("-n", "--iters"), _iters,
           "Timed ops per sample, or '{default}' (default): calibrated to --min-sample-ms.", default="auto"),
    Option("min_sample_ms", ("--min-sample-ms",), number(),
           "With --iters auto, the sample length each size is calibrated for (default {default}); "
           "the run ends by saying how long samples lasted.", default=MIN_SAMPLE_MS),
    Option("trials", ("--trials",), whole(1, MAX_TRIALS),
           "Samples per point; the row reports their median and range (default {default}).", default=1),
    Option("agg", ("--agg",), choice(*AGGREGATIONS),
           "Combine ranks' times by {default} (default: the slowest rank defines a collective), avg or min.",
           default="max"),
    Option("inplace", ("--inplace",), switch,
           "Only in-place or only out-of-place (default: both where torch has both).", off="--no-inplace"),
    Option("check", ("--check",), switch, "Verify every output element after timing (default {default}).",
           default=True, off="--no-check"),
    Option("split", ("--split",), _split,
           "Measure in sub-groups, all at once, one row per group: node (one per host), rail (local rank i "
           "of every host), mod:N (rank % N) or div:N (rank // N), as nccl-tests' NCCL_TESTS_SPLIT.",
           metavar="HOW"),
    Option("cycles", ("--cycles",), whole(0, MAX_CYCLES),
           "Run the whole sweep this many times (burn-in, as nccl-tests -N); 0: until interrupted. Rows carry "
           "their cycle; the end gives each point's spread across cycles (default {default}).", default=1),
    Option("nccl_env", ("--nccl-env",), _nccl_env,
           "Run the sweep once per setting of an NCCL variable, each in fresh ranks (NCCL reads them once): "
           "NAME=VALUE, the value passed whole as NCCL reads it (NCCL_ALGO=Ring,Tree is one variant: Ring or Tree); "
           "repeat the option for more variants (--nccl-env NCCL_ALGO=Ring --nccl-env NCCL_ALGO=Tree); several "
           "names give every combination. Rows carry their variant; "
           "the end names the fastest. Not under a launcher (loop in the shell there).", default=(),
           metavar="NAME=VALUE", many=True),
    Option("nccl_trace", ("--nccl-trace",), switch,
           "NCCL only: read back which algorithm and protocol NCCL chose at each point (its tuning log, "
           "NCCL_DEBUG=INFO into a file per rank) into the algo and proto columns; the log line costs the "
           "logging rank a little time per op.", default=False),
    BACKEND,
    OUT,
    RESULTS_ROOT,
    TIMEOUT,
    Option("cuda_graph", ("--cuda-graph",), whole(0, MAX_CUDA_GRAPH_OPS),
           "GPU only: capture this many ops in a CUDA graph and replay it (as nccl-tests -G).", default=0),
    Option("blocking", ("--blocking",), switch, "GPU only: synchronize after every op (per-op latency mode).",
           default=False),
    Option("peak_gbps", ("--peak",), number(), "Reference peak bus bandwidth in GB/s for %peak (default: detected)."),
    Option("min_busbw_gbps", ("--min-busbw",), number(),
           "After the run, exit 1 when any op's busbw at its largest measured size is below this many GB/s.",
           metavar="GBPS"),
    PROM,
)
SWEEP_OPTION = {option.key: option for option in SWEEP_OPTIONS}
PRESET = Option("preset", ("--config",), path, "TOML preset (see configs/); flags given here win.")

# What only the process that owns the whole run acts on (local worker ranks never see these): the
# comparison with a baseline after the sweep, and the baseline saved.
BASELINE = Option("baseline", ("--baseline",), path,
                  "After the run, compare it with this run folder, results.csv or nccl-tests log/JSON (as `compare`); "
                  "exit 1 on a regression.", metavar="PATH")
SAVE_BASELINE = Option("save_baseline", ("--save-baseline",), text,
                       "Store the run as <results-root>/baselines/NAME/ (with --baseline: only if the check passes).",
                       metavar="NAME")
REPLACE_BASELINE = Option("replace_baseline", ("--replace-baseline",), switch,
                          "With --save-baseline: replace a baseline of that name (refused otherwise).", default=False)
SWEEP_BASELINE_OPTIONS = (BASELINE, TOLERANCE, SAVE_BASELINE, REPLACE_BASELINE, ALLOW_MISMATCH)

# -- the doctor's options: DoctorConfig's fields --------------------------------------------------
PHASES = ("nodes", "pairs")  # in the order they run
DOCTOR_ELEMENT_BYTES = 4  # the doctor's buffers are float32
# One large-ish message per measurement. GPU: where NVLink and IB reach their plateau in
# nccl-tests. CPU/gloo: big enough that a pair exchange is bandwidth-bound (not latency-bound)
# on a veth link, small enough that a shaped link of a few hundred Mbit/s still takes < 0.2 s.
DOCTOR_SIZE_BYTES = PerDevice(gpu=256 * 1024**2, cpu=4 * 1024**2)


def _phases(values: Any, option: str) -> tuple[str, ...]:
    """Phases may repeat or hold commas; 'all' (or none given) means every phase; PHASES order."""
    chosen = expand_choices(values or ["all"], PHASES, option, "phase", normalize=str.lower)
    return tuple(p for p in PHASES if p in chosen)


def _hostlist(value: Any, option: str) -> tuple[str, ...]:
    return tuple(hostlist.expand(str(value), option))


DOCTOR_OPTIONS = (
    Option("phases", ("--phase",), _phases,
           "nodes (intra-node all_reduce per host), pairs (every node pair, rail by rail) or {default} (default); "
           "repeat or comma-separate.", default=PHASES, show=lambda phases: "all" if phases == PHASES else
           ",".join(phases), many=True),
    Option("quick", ("--quick",), switch,
           "A few random pairings, then suspects re-tested against nodes that passed, instead of all pairs.",
           default=False),
    # each node meets up to this many partners
    Option("quick_rounds", ("--quick-rounds",), whole(1), "Random pairings in --quick (default {default}).",
           default=3),
    Option("seed", ("--seed",), whole(None),
           "Seed of --quick's pairings (default {default}): the same seed, the same pairs.", default=0),
    Option("size_bytes", ("--size",), size(DOCTOR_ELEMENT_BYTES, "one float32"),
           "Message size per measurement, e.g. 4M, 256M (default: {default}).", default=DOCTOR_SIZE_BYTES,
           show=shown_size),
    Option("iters", ("--iters",), whole(1), "Exchanges (or all_reduces) per sample (default {default}).",
           default=4),
    # verdicts judge the fastest sample, so a disturbed one costs nothing
    Option("samples", ("--samples",), whole(1),
           "Samples per measurement: verdicts judge the fastest, doctor.csv also has the median "
           "(default {default}).", default=3),
    # untimed exchanges first: connection set-up and first-touch pages
    Option("warmup", ("-w", "--warmup"), whole(0), "Untimed exchanges before each measurement (default {default}).",
           default=1),
    # healthy simulated hosts stayed within 15% of their run's median (docs/doctor.md)
    Option("tolerance", ("--tolerance",), tolerance,
           "Suspect when below the fleet median by more than this (and 3 MAD-sigmas): {default} (default) or 0.2.",
           default=0.20, show=percent),
    Option("expect_gbps", ("--expect",), number(),
           "Also suspect any pair below this busbw in GB/s (what the fabric should give).", metavar="GBPS"),
    Option("expect_hosts", ("--expect-hosts",), _hostlist,
           "Hosts that should take part, as a Slurm hostlist (node[01-08],gpu3); one that does not join is a "
           "'missing' suspect (default under srun: SLURM_JOB_NODELIST).", metavar="LIST"),
    Option("exclude_file", ("--exclude-file",), path,
           "Write the hosts to keep out (node, rail and missing suspects) to PATH, one per line; empty when none.",
           metavar="PATH"),
    BACKEND,
    OUT,
    RESULTS_ROOT,
    TIMEOUT,
    PROM,
)
DOCTOR_OPTION = {option.key: option for option in DOCTOR_OPTIONS}

# -- replay's: the timing of each collective as the sweep's, and where the run goes --------------------
TRACES = Argument("traces", "TRACE...",
                  "A job's PyTorch profiler trace (Kineto JSON, or its gzip): one file, or one per rank of one job.",
                  many=True)
ENVELOPE = Option("envelope", ("--envelope",), path,
                  "After a replay, put each collective beside this sweep's busbw at its size (a run folder, "
                  "results.csv or nccl-tests log of the same fabric).", metavar="RUN")
REPLAY_OPTIONS = (
    *(SWEEP_OPTION[key] for key in ("warmup", "iters", "min_sample_ms", "trials")),
    BACKEND,
    OUT,
    RESULTS_ROOT,
    TIMEOUT,
)
REPLAY_OPTION = {option.key: option for option in REPLAY_OPTIONS}

# -- compare's -------------------------------------------------------------------------------------
BASELINE_RUN = Argument("baseline", "BASELINE",
                        "Baseline: run folder, results.csv, nccl_bench JSON, nccl-tests log or -J JSON.")
CURRENT_RUN = Argument("current", "CURRENT", "Current run, in any of the same forms.")
LATENCY_BELOW = Option("min_bytes", ("--min-bytes",), size(),
                       "Sizes below this are latency-bound: judged on time, not busbw.", default=64 * 1024,
                       show=shown_size)
MARKDOWN = Option("markdown", ("--markdown",), path, "Also write a Markdown report to FILE.", metavar="FILE")
JUNIT = Option("junit", ("--junit",), path, "Also write JUnit XML (one testcase per row) to FILE.", metavar="FILE")

# -- report's ---------------------------------------------------------------------------------------
RUNS = Argument("runs", "RUN...", "Run folder, results.csv, nccl_bench JSON, nccl-tests log or nccl-tests -J JSON.",
                many=True)
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
MULTI_NODE = Option("multi_node", ("--multi-node",), switch,
                    "Include the network: min(intra-node peak, NIC per rank).", default=False)

# -- the history's (sweep, doctor and every history command) ---------------------------------------------
HISTORY = Option("history", ("--history",), text,
                 "The history: a file, sqlite:///PATH or postgresql://user@host:port/db (default: "
                 "$NCCL_BENCH_HISTORY, else <results-root>/history.sqlite).", metavar="URL")
# How long a command waits for the history (a lock, a server's answer) before it gives up; a run that
# waited is kept whole, to be added later (history/store.py, history/address.py's DEFAULT_WAIT_S).
HISTORY_WAIT = Option("history_wait_s", ("--history-wait",), number(),
                      "Seconds to wait for a locked or silent history before giving up (default {default}).",
                      default=20.0, metavar="SECONDS")
NO_HISTORY = Option("no_history", ("--no-history",), switch, "Do not record this run in the history.",
                    default=False)
# What a command that records its run takes (sweep, doctor, replay): where, how long to wait, or not at all.
RECORDING_OPTIONS = (HISTORY, HISTORY_WAIT, NO_HISTORY)
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
PAGE = Argument("page", "FILE", "The page to write: one self-contained HTML file.")

# -- the history's check --run, accept and diff -----------------------------------------------------------
RUN_ID_CHARS = 8  # the fewest leading characters of a run id that name it; the sweep prints twelve


def _run_id(value: Any, option: str) -> str:
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
JUDGE_RUN = Option("run", ("--run",), _run_id,
                   "Judge this run (its id as the sweep prints it) in every series it has a value in, instead of "
                   "each series' latest; fails (exit 3) when the history does not hold it.", metavar="ID")
ACCEPT_RUN = Argument("run", "RUN", "The run (its id) that becomes the new normal of every series it has a value in.")
REASON = Option("reason", ("--reason",), text,
                "Why this run is the new normal (required): shown by check and on the page.", metavar="TEXT")
DIFF_BEFORE = Argument("before", "RUN_A", "The earlier run (its id).")
DIFF_AFTER = Argument("after", "RUN_B", "The later run (its id): each series' change from RUN_A, and what changed.")

# -- the app's ---------------------------------------------------------------------------------------
VERSION = Option("version", ("--version",), switch, "Print the version and exit.", default=False)
HELP_FLAGS = ("-h", "--help")  # click's own help option, under the names every command answers to
