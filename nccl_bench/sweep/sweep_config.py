"""The sweep's options and configuration: SweepConfig, one frozen dataclass whose fields carry their
options' declarations (flags, parser with its bounds, help, default); BaselineOptions, what only the
process that owns the run acts on; TOML presets, cross-option checks, and the defaults that fit the host.

Precedence is defaults < preset file (--config) < command-line flags. Every key of a preset is a
field name of SweepConfig, read by the same declaration as its flag; an unknown key is an error that
names it (option_types.build_config). This is the sweep's declaration module: the sweep's other modules
name an option by its key, and this one and cli/ write its flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import (
    Option,
    PerDevice,
    choice,
    declaration,
    declared,
    number,
    option,
    path,
    size,
    switch,
    text,
    whole,
)
from nccl_bench.option_types import option_name as _option_name
from nccl_bench.options import ALLOW_MISMATCH, BACKEND, OUT, PROM, RESULTS_ROOT, TIMEOUT, TOLERANCE, expand_ops
from nccl_bench.units import op_table
from nccl_bench.units.nccl_env import Assignment, as_texts, variants
from nccl_bench.units.sizes import (
    RangeNames,
    check_range,
    count_sizes,
    format_size,
    geometric_sizes,
    linear_sizes,
    parse_size,
)
from nccl_bench.units.split_spec import Split

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}
DTYPES = tuple(DTYPE_BYTES)
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
AGGREGATIONS = ("max", "avg", "min")

# Defaults by device. GPU: the range users run nccl-tests with (-b 8 -e 1G -f 2).
# CPU/gloo: 1 KiB..64 MiB, which finishes `sweep --op all_reduce` on 2 ranks in well under a minute.
GPU_SIZE_RANGE = (8, 1024**3)
CPU_SIZE_RANGE = (1024, 64 * 1024**2)

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
    from nccl_bench.units.split_spec import parse_split

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


PRESET = Option("preset", ("--config",), path, "TOML preset (see configs/); flags given here win.")


@dataclass(frozen=True)
class SweepConfig:
    """Every sweep option. None means "choose for this host" (see resolve_sizes and min_sample)."""

    PRESET: ClassVar[Option] = PRESET  # the file of field values that flags override

    ops: tuple[str, ...] = option(
        ("--op",), _ops, "Collective to run; repeat or comma-separate; 'all' for every one. See `nccl-bench ops`.",
        default="all_reduce", many=True)
    min_bytes: int | None = option(("-b", "--min-bytes"), size(), "Smallest size, e.g. 8, 1K, 1M (powers of 1024).")
    max_bytes: int | None = option(("-e", "--max-bytes"), size(), "Largest size, e.g. 64M, 1G.")
    step_factor: float | None = option(  # None: the option's default, unless step_bytes is given
        ("-f", "--step-factor"), number(above=1), "Geometric step between sizes (default {default}).", default=2.0,
        unset=None)
    step_bytes: int | None = option(("-i", "--step-bytes"), size(), "Linear step between sizes instead of -f.")
    sizes: tuple[int, ...] | None = option(("--sizes",), _sizes, "Explicit sizes, e.g. 1K,1M,64M (instead of -b/-e).")
    dtype: str = option(("-d", "--dtype"), choice(*DTYPES),
                        "{default} (default), float16, bfloat16, float64, int8, uint8, int32, int64.",
                        default="float32")
    reduce_op: str = option(("-o", "--reduce-op"), choice(*REDUCE_OPS), "{default} (default), prod, min, max, avg.",
                            default="sum")
    root: int = option(("--root",), whole(0), "Root rank of broadcast, reduce, gather, scatter (default {default}).",
                       default=0)
    alltoallv: str = option(  # all_to_allv's per-peer shares (units/alltoallv.py)
        ("--alltoallv",), _distribution, "all_to_allv's per-peer shares: even, random[:SEED] (default {default}) or "
        "skewed[:HOT] (HOT peers get 80% of the data).", default="random:0", metavar="DIST")
    warmup: int = option(("-w", "--warmup"), whole(0, MAX_WARMUP), "Untimed ops before each point (default {default}).",
                         default=5)
    iters: int | None = option(  # None = auto: calibrated per size to last min_sample_ms
        ("-n", "--iters"), _iters, "Timed ops per sample, or '{default}' (default): calibrated to --min-sample-ms.",
        default="auto")
    min_sample_ms: float | None = option(  # None: the option's default for the device
        ("--min-sample-ms",), number(), "With --iters auto, the sample length each size is calibrated for (default "
        "{default}); the run ends by saying how long samples lasted.", default=MIN_SAMPLE_MS)
    trials: int = option(("--trials",), whole(1, MAX_TRIALS),
                         "Samples per point; the row reports their median and range (default {default}).", default=1)
    agg: str = option(("--agg",), choice(*AGGREGATIONS),
                      "Combine ranks' times by {default} (default: the slowest rank defines a collective), avg or min.",
                      default="max")
    inplace: bool | None = option(  # None = both placements where the op has both
        ("--inplace",), switch, "Only in-place or only out-of-place (default: both where torch has both).",
        off="--no-inplace")
    check: bool = option(("--check",), switch, "Verify every output element after timing (default {default}).",
                         default=True, off="--no-check")
    split: Split | None = option(  # sub-groups that measure at once (ranks/split.py); None: the whole world
        ("--split",), _split, "Measure in sub-groups, all at once, one row per group: node (one per host), rail "
        "(local rank i of every host), mod:N (rank % N) or div:N (rank // N), as nccl-tests' NCCL_TESTS_SPLIT.",
        metavar="HOW")
    cycles: int = option(  # passes over every point; 0 = until interrupted
        ("--cycles",), whole(0, MAX_CYCLES), "Run the whole sweep this many times (burn-in, as nccl-tests -N); 0: "
        "until interrupted. Rows carry their cycle; the end gives each point's spread across cycles (default "
        "{default}).", default=1)
    nccl_env: tuple[Assignment, ...] = option(  # NCCL variables and values: a variant per combination
        ("--nccl-env",), _nccl_env,
        "Run the sweep once per setting of an NCCL variable, each in fresh ranks (NCCL reads them once): "
        "NAME=VALUE, the value passed whole as NCCL reads it (NCCL_ALGO=Ring,Tree is one variant: Ring or Tree); "
        "repeat the option for more variants (--nccl-env NCCL_ALGO=Ring --nccl-env NCCL_ALGO=Tree); several "
        "names give every combination. Rows carry their variant; "
        "the end names the fastest. Not under a launcher (loop in the shell there).", default=(),
        metavar="NAME=VALUE", many=True)
    nccl_trace: bool = option(  # algo/proto columns from NCCL's tuning log (ranks/nccl_trace.py)
        ("--nccl-trace",), switch, "NCCL only: read back which algorithm and protocol NCCL chose at each point (its "
        "tuning log, NCCL_DEBUG=INFO into a file per rank) into the algo and proto columns; the log line costs the "
        "logging rank a little time per op.", default=False)
    backend: str = option(BACKEND)
    out: Path | None = option(OUT, folder="<ops>")
    results_root: Path = option(RESULTS_ROOT)
    timeout_s: float = option(TIMEOUT, step="collective")
    cuda_graph: int = option(("--cuda-graph",), whole(0, MAX_CUDA_GRAPH_OPS),
                             "GPU only: capture this many ops in a CUDA graph and replay it (as nccl-tests -G).",
                             default=0)
    blocking: bool = option(("--blocking",), switch, "GPU only: synchronize after every op (per-op latency mode).",
                            default=False)
    peak_gbps: float | None = option(("--peak",), number(),
                                     "Reference peak bus bandwidth in GB/s for %peak (default: detected).")
    min_busbw_gbps: float | None = option(  # the floor of each op's busbw at its largest measured size
        ("--min-busbw",), number(),
        "After the run, exit 1 when any op's busbw at its largest measured size is below this many GB/s.",
        metavar="GBPS")
    prom: Path | None = option(PROM)
    fields_from_flags: tuple[str, ...] = field(default=(), compare=False)

    def check_together(self) -> None:
        validate(self)


BASELINE = Option(None, ("--baseline",), path, "After the run, compare it with this run folder, results.csv or "
                  "nccl-tests log/JSON (as `compare`); exit 1 on a regression.", metavar="PATH")
WITH_BASELINE = f"With {BASELINE.name}"  # the condition that the options about a baseline are shown under


@dataclass(frozen=True)
class BaselineOptions:
    """What only the process that owns the whole run acts on (local worker ranks never see these): the
    comparison with a baseline after the sweep, and the baseline saved. None: not given."""

    baseline: Path | None = option(BASELINE)
    tolerance: float | None = option(TOLERANCE, unset=None, prefix=WITH_BASELINE)
    save_baseline: str | None = option(
        ("--save-baseline",), text, "Store the run as <results-root>/baselines/NAME/ (with --baseline: only if the "
        "check passes).", metavar="NAME")
    replace_baseline: bool = option(("--replace-baseline",), switch,
                                    "With --save-baseline: replace a baseline of that name (refused otherwise).",
                                    default=False, given_default=True)
    allow_mismatch: bool = option(ALLOW_MISMATCH, given_default=True, prefix=WITH_BASELINE)


CONFIG_KEYS = tuple(declared(SweepConfig))


def option_name(key: str) -> str:
    """The sweep option that sets a SweepConfig (or BaselineOptions) field, for messages."""
    return _option_name(BaselineOptions if key in declared(BaselineOptions) else SweepConfig, key)


SIZE_RANGE = RangeNames(*(option_name(key) for key in ("min_bytes", "max_bytes", "step_factor", "step_bytes")))


def _any_op(config: SweepConfig, trait: str) -> bool:
    return any(getattr(op_table.OPS[op], trait) for op in config.ops)


def validate(config: SweepConfig) -> None:
    """Checks that need several fields at once; run before any process group exists."""
    sizes, (low, high, factor, step) = option_name("sizes"), SIZE_RANGE
    if config.sizes is not None and (config.min_bytes or config.max_bytes or config.step_bytes):
        raise UserInputError(sizes, f"give either {sizes} or {low}/{high}, not both")
    if config.step_bytes is not None and config.step_factor is not None:
        raise UserInputError(step, f"give either {step} (linear) or {factor} (geometric), not both")
    if config.min_bytes is not None and config.max_bytes is not None:
        check_range(config.min_bytes, config.max_bytes, SIZE_RANGE)
    if _any_op(config, "reduces") and config.reduce_op == "avg" and config.dtype not in FLOAT_DTYPES:
        raise UserInputError(option_name("reduce_op"),
                             f"avg needs a floating-point {option_name('dtype')}, got {config.dtype}")
    refuse_tool_owned(config)
    if config.cuda_graph and config.blocking:
        raise UserInputError(option_name("cuda_graph"), f"cannot be combined with {option_name('blocking')}")
    if not any(op_table.moves_data(op) for op in config.ops):  # barrier alone: no message at all
        for key in ("sizes", "min_bytes", "max_bytes", "step_bytes", "step_factor", "min_busbw_gbps"):
            if getattr(config, key) is not None:
                option, ops = option_name(key), " and ".join(config.ops)
                raise UserInputError(option, f"{ops} sends no message, so no size applies; drop {option}")


def refuse_tool_owned(config: SweepConfig) -> None:
    """--nccl-env never sets what the tool sets for its ranks itself (the run's claim, its parent, its
    variant; --nccl-trace's debug variables): the run would measure, then fail or record another value."""
    from nccl_bench.ranks.nccl_trace import TRACE_VARIABLES
    from nccl_bench.ranks.run_owner import TOOL_ENV_PREFIX

    option = option_name("nccl_env")
    for name in dict.fromkeys(name for variant in variants(config.nccl_env) for name, _ in variant):
        if name.startswith(TOOL_ENV_PREFIX):
            raise UserInputError(option, f"{name} is nccl-bench's own ({TOOL_ENV_PREFIX}* are set by the tool for "
                                 "its ranks), not an NCCL setting; drop it")
        if config.nccl_trace and name in TRACE_VARIABLES:
            raise UserInputError(option, f"{name} is set by {option_name('nccl_trace')} to read NCCL's tuning "
                                 "log; drop one of the two")


def ignored_options(config: SweepConfig) -> list[str]:
    """Options given on the command line that none of the chosen collectives uses: said once, not refused."""
    notes = []
    ops = ", ".join(config.ops)
    uses = {
        "reduce_op": (_any_op(config, "reduces"), "reduces"),
        "root": (_any_op(config, "rooted"), "has a root"),
        "alltoallv": (_any_op(config, "uneven"), "sends uneven shares"),
        "dtype": (any(op_table.moves_data(op) for op in config.ops), "sends data"),
    }
    for key, (used, what) in uses.items():
        if key in config.fields_from_flags and not used:
            notes.append(f"{option_name(key)} {getattr(config, key)} is ignored: none of {ops} {what}")
    return notes


def min_sample_ms(config: SweepConfig, on_gpu: bool) -> float:
    if config.min_sample_ms is not None:
        return config.min_sample_ms
    return MIN_SAMPLE_MS.gpu if on_gpu else MIN_SAMPLE_MS.cpu


def resolve_sizes(config: SweepConfig, on_gpu: bool) -> list[int]:
    """The requested sizes before per-op rounding, with the host's default range filled in."""
    if config.sizes is not None:
        return sorted(set(config.sizes))
    default_min, default_max = GPU_SIZE_RANGE if on_gpu else CPU_SIZE_RANGE
    high = config.max_bytes if config.max_bytes is not None else max(default_max, config.min_bytes or 0)
    low = config.min_bytes if config.min_bytes is not None else min(default_min, high)
    factor = config.step_factor or declaration(SweepConfig, "step_factor").default
    count = count_sizes(low, high, factor, config.step_bytes, at_most=MAX_SIZES, names=SIZE_RANGE)
    if count > MAX_SIZES:  # refused before a single size is built
        if config.step_bytes is not None:
            option, how, many = SIZE_RANGE.step, f"steps of {format_size(config.step_bytes)}", f"{count:,}"
        else:
            option, how, many = SIZE_RANGE.factor, f"a factor of {factor}", f"more than {MAX_SIZES:,}"
        low_flags, high_flags = ("/".join(declaration(SweepConfig, key).flags) for key in ("min_bytes", "max_bytes"))
        raise UserInputError(
            option,
            f"{how} from {format_size(low)} to {format_size(high)} make {many} sizes; a sweep takes at most "
            f"{MAX_SIZES:,}: raise {option} or narrow {low_flags} .. {high_flags}",
        )
    if config.step_bytes is not None:
        return linear_sizes(low, high, config.step_bytes, SIZE_RANGE)
    return geometric_sizes(low, high, factor, SIZE_RANGE)


def describe_sizes(sizes: list[int]) -> str:
    if not sizes:
        return "none"
    if len(sizes) == 1:
        return format_size(sizes[0])
    return f"{format_size(sizes[0])} .. {format_size(sizes[-1])} ({len(sizes)} sizes)"


def as_dict(config: SweepConfig) -> dict[str, Any]:
    """JSON-friendly view for meta.json."""
    values = {k: getattr(config, k) for k in CONFIG_KEYS}
    for key in ("out", "results_root", "prom", "split"):
        if values[key] is not None:
            values[key] = str(values[key])
    values["ops"] = list(values["ops"])
    values["nccl_env"] = [text for assignment in values["nccl_env"] for text in as_texts(assignment)]
    if values["sizes"] is not None:
        values["sizes"] = list(values["sizes"])
    return values
