"""Sweep configuration: one frozen dataclass, TOML presets, and the defaults that fit the host.

Precedence is defaults < preset file (--config) < command-line flags. Every key of a preset is a
field name of SweepConfig; an unknown key is an error that names it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from nccl_bench.errors import UserInputError
from nccl_bench.ranks.collectives import OP_NAMES, REGISTRY
from nccl_bench.units.sizes import (
    check_range,
    count_sizes,
    format_size,
    geometric_sizes,
    linear_sizes,
    parse_size,
)

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
AGGREGATIONS = ("max", "avg", "min")
BACKENDS = ("auto", "nccl", "gloo", "mpi", "ucc")

# Defaults by device. GPU: the range users run nccl-tests with (-b 8 -e 1G -f 2).
# CPU/gloo: 1 KiB..64 MiB, which finishes `sweep --op all_reduce` on 2 ranks in well under a minute.
GPU_SIZE_RANGE = (8, 1024**3)
CPU_SIZE_RANGE = (1024, 64 * 1024**2)
# Auto iterations: a timed sample lasts at least this long, so timer resolution, launch jitter and
# rank skew are small against it. CPU samples are longer because the host is shared and noisier.
GPU_MIN_SAMPLE_MS = 50.0
CPU_MIN_SAMPLE_MS = 200.0

# Upper bounds on numbers the user types, checked before anything is built from them, so no input
# makes the tool hold memory in proportion to a number (a list of a billion sizes, a timestamp per
# op for a billion ops). Each is far above what a real sweep uses: nccl-tests' -b 8 -e 1G -f 2 is
# 28 sizes, and a linear -i 1M sweep to 1G is 1,024.
MAX_SIZES = 10_000
MAX_ITERS = 1_000_000  # one timestamp per op per sample is kept for p50/p99
MAX_WARMUP = 1_000_000
MAX_TRIALS = 1_000
MAX_CUDA_GRAPH_OPS = 10_000  # ops captured in one CUDA graph: each holds GPU memory while captured


@dataclass(frozen=True)
class SweepConfig:
    """Every sweep option. None means "choose for this host" (see resolve_sizes and min_sample)."""

    ops: tuple[str, ...] = ("all_reduce",)
    min_bytes: int | None = None
    max_bytes: int | None = None
    step_factor: float | None = None
    step_bytes: int | None = None
    sizes: tuple[int, ...] | None = None
    dtype: str = "float32"
    reduce_op: str = "sum"
    root: int = 0
    warmup: int = 5
    iters: int | None = None  # None = auto: calibrated per size to last min_sample_ms
    min_sample_ms: float | None = None
    trials: int = 1
    agg: str = "max"
    inplace: bool | None = None  # None = both placements where the op has both
    check: bool = True
    backend: str = "auto"
    out: Path | None = None
    results_root: Path = Path("results")
    timeout_s: float = 300.0
    cuda_graph: int = 0
    blocking: bool = False
    peak_gbps: float | None = None
    fields_from_flags: tuple[str, ...] = field(default=(), compare=False)


CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(SweepConfig) if f.name != "fields_from_flags")


def expand_choices(values, choices: tuple[str, ...], option: str, noun: str, normalize=str.strip) -> tuple[str, ...]:
    """Names that may repeat or hold commas, 'all' meaning every choice; first-seen order, no repeats."""
    expanded: list[str] = []
    for value in values:
        for part in str(value).split(","):
            part = normalize(part.strip())
            if not part:
                continue
            for candidate in choices if part == "all" else (part,):
                if candidate not in choices:
                    raise UserInputError(option, f"unknown {noun} {part!r}; choose from {', '.join(choices)} or all")
                if candidate not in expanded:
                    expanded.append(candidate)
    if not expanded:
        raise UserInputError(option, f"no {noun} given")
    return tuple(expanded)


def expand_ops(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`--op` may repeat or hold commas; 'all' means every registered collective."""
    return expand_choices(names, OP_NAMES, "--op", "collective", normalize=lambda part: part.replace("-", "_"))


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    value = str(value).lower()
    if value not in choices:
        raise UserInputError(option, f"{value!r} is not one of {', '.join(choices)}")
    return value


def _positive_int(option: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    try:
        number = int(value)
        if number != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise UserInputError(option, f"expected a whole number, got {value!r}") from None
    if number < minimum:
        raise UserInputError(option, f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise UserInputError(option, f"must be at most {maximum:,}, got {number:,}")
    return number


def _positive_float(option: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserInputError(option, f"expected a number, got {value!r}") from None
    if not number > 0:
        raise UserInputError(option, f"must be greater than 0, got {value!r}")
    return number


def _parse_iters(value: Any) -> int | None:
    if value is None or str(value).lower() == "auto":
        return None
    return _positive_int("--iters", value, maximum=MAX_ITERS)


# Keys whose option is not "--" + key with dashes (tests/unit/test_config.py checks every key
# against the sweep command's options, so this cannot drift from the CLI).
_OPTION_NAMES = {"ops": "--op", "timeout_s": "--timeout", "peak_gbps": "--peak"}


def option_name(key: str) -> str:
    """The sweep option that sets a SweepConfig field, for error messages."""
    return _OPTION_NAMES.get(key, "--" + key.replace("_", "-"))


def normalize(values: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """Validate and convert raw values (from flags or a preset) into SweepConfig field values."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in CONFIG_KEYS:
            raise UserInputError(source or "--config", f"unknown key {key!r}; known keys: {', '.join(CONFIG_KEYS)}")
        option = option_name(key) if not source else f"{source}: {key}"
        if key == "ops":
            out[key] = expand_ops([value] if isinstance(value, str) else list(value))
        elif key in ("min_bytes", "max_bytes", "step_bytes"):
            out[key] = parse_size(value, option)
        elif key == "sizes":
            parts = value.split(",") if isinstance(value, str) else list(value)
            sizes = tuple(parse_size(p.strip() if isinstance(p, str) else p, option) for p in parts if str(p).strip())
            if not sizes:
                raise UserInputError(option, "no sizes given")
            if len(set(sizes)) > MAX_SIZES:
                raise UserInputError(option, f"{len(set(sizes)):,} sizes given; a sweep takes at most {MAX_SIZES:,}")
            out[key] = sizes
        elif key == "step_factor":
            factor = _positive_float(option, value)
            if factor <= 1:
                raise UserInputError(option, f"must be greater than 1, got {value!r}")
            out[key] = factor
        elif key == "dtype":
            out[key] = _choice(option, value, DTYPES)
        elif key == "reduce_op":
            out[key] = _choice(option, value, REDUCE_OPS)
        elif key == "agg":
            out[key] = _choice(option, value, AGGREGATIONS)
        elif key == "backend":
            out[key] = _choice(option, value, BACKENDS)
        elif key == "root":
            out[key] = _positive_int(option, value, minimum=0)
        elif key == "cuda_graph":
            out[key] = _positive_int(option, value, minimum=0, maximum=MAX_CUDA_GRAPH_OPS)
        elif key == "warmup":
            out[key] = _positive_int(option, value, minimum=0, maximum=MAX_WARMUP)
        elif key == "trials":
            out[key] = _positive_int(option, value, maximum=MAX_TRIALS)
        elif key == "iters":
            out[key] = _parse_iters(value)
        elif key in ("min_sample_ms", "timeout_s", "peak_gbps"):
            out[key] = _positive_float(option, value)
        elif key in ("inplace", "check", "blocking"):
            if not isinstance(value, bool):
                raise UserInputError(option, f"expected true or false, got {value!r}")
            out[key] = value
        elif key in ("out", "results_root"):
            out[key] = Path(value)
        else:  # pragma: no cover - every key is handled above
            out[key] = value
    return out


def load_preset(path: Path) -> dict[str, Any]:
    """Read a TOML preset; keys are SweepConfig field names (ops, min_bytes, iters, ...)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise UserInputError("--config", f"no such file: {path}") from None
    except OSError as exc:
        raise UserInputError("--config", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserInputError("--config", f"{path} is not valid TOML: {exc}") from None
    data.pop("description", None)
    return normalize(data, source=str(path))


def build_config(flags: Mapping[str, Any], preset: Path | None = None) -> SweepConfig:
    """defaults < preset < flags; flags whose value is None were not given."""
    merged: dict[str, Any] = {}
    if preset is not None:
        merged.update(load_preset(preset))
    given = {k: v for k, v in flags.items() if v is not None}
    merged.update(normalize(given))
    config = SweepConfig(**merged, fields_from_flags=tuple(given))
    validate(config)
    return config


def validate(config: SweepConfig) -> None:
    """Checks that need several fields at once; run before any process group exists."""
    if config.sizes is not None and (config.min_bytes or config.max_bytes or config.step_bytes):
        raise UserInputError("--sizes", "give either --sizes or --min-bytes/--max-bytes, not both")
    if config.step_bytes is not None and config.step_factor is not None:
        raise UserInputError("--step-bytes", "give either --step-bytes (linear) or --step-factor (geometric), not both")
    if config.min_bytes is not None and config.max_bytes is not None:
        check_range(config.min_bytes, config.max_bytes)
    reduces = any(REGISTRY[op].has_reduction for op in config.ops)
    if reduces and config.reduce_op == "avg" and config.dtype not in FLOAT_DTYPES:
        raise UserInputError("--reduce-op", f"avg needs a floating-point --dtype, got {config.dtype}")
    if config.cuda_graph and config.blocking:
        raise UserInputError("--cuda-graph", "cannot be combined with --blocking")
    if all(REGISTRY[op].factor is None for op in config.ops):  # barrier alone: no message at all
        for key in ("sizes", "min_bytes", "max_bytes", "step_bytes", "step_factor"):
            if getattr(config, key) is not None:
                raise UserInputError(
                    option_name(key), f"{' and '.join(config.ops)} sends no message, so no size applies; drop {option_name(key)}"
                )


def ignored_options(config: SweepConfig) -> list[str]:
    """Options given on the command line that none of the chosen collectives uses: said once, not refused."""
    notes = []
    ops = ", ".join(config.ops)
    uses = {
        "reduce_op": (any(REGISTRY[op].has_reduction for op in config.ops), "reduces"),
        "root": (any(REGISTRY[op].has_root for op in config.ops), "has a root"),
        "dtype": (any(REGISTRY[op].factor is not None for op in config.ops), "sends data"),
    }
    for key, (used, what) in uses.items():
        if key in config.fields_from_flags and not used:
            notes.append(f"{option_name(key)} {getattr(config, key)} is ignored: none of {ops} {what}")
    return notes


def min_sample_ms(config: SweepConfig, on_gpu: bool) -> float:
    if config.min_sample_ms is not None:
        return config.min_sample_ms
    return GPU_MIN_SAMPLE_MS if on_gpu else CPU_MIN_SAMPLE_MS


def resolve_sizes(config: SweepConfig, on_gpu: bool) -> list[int]:
    """The requested sizes before per-op rounding, with the host's default range filled in."""
    if config.sizes is not None:
        return sorted(set(config.sizes))
    default_min, default_max = GPU_SIZE_RANGE if on_gpu else CPU_SIZE_RANGE
    high = config.max_bytes if config.max_bytes is not None else max(default_max, config.min_bytes or 0)
    low = config.min_bytes if config.min_bytes is not None else min(default_min, high)
    count = count_sizes(low, high, config.step_factor, config.step_bytes, at_most=MAX_SIZES)
    if count > MAX_SIZES:  # refused before a single size is built
        if config.step_bytes is not None:
            option, how, many = "--step-bytes", f"steps of {format_size(config.step_bytes)}", f"{count:,}"
        else:
            option, how, many = "--step-factor", f"a factor of {config.step_factor or 2.0}", f"more than {MAX_SIZES:,}"
        raise UserInputError(
            option,
            f"{how} from {format_size(low)} to {format_size(high)} make {many} sizes; a sweep takes at most "
            f"{MAX_SIZES:,}: raise {option} or narrow -b/--min-bytes .. -e/--max-bytes",
        )
    if config.step_bytes is not None:
        return linear_sizes(low, high, config.step_bytes)
    return geometric_sizes(low, high, config.step_factor or 2.0)


def describe_sizes(sizes: list[int]) -> str:
    if not sizes:
        return "none"
    if len(sizes) == 1:
        return format_size(sizes[0])
    return f"{format_size(sizes[0])} .. {format_size(sizes[-1])} ({len(sizes)} sizes)"


def as_dict(config: SweepConfig) -> dict[str, Any]:
    """JSON-friendly view for meta.json."""
    values = {k: getattr(config, k) for k in CONFIG_KEYS}
    for key in ("out", "results_root"):
        if values[key] is not None:
            values[key] = str(values[key])
    values["ops"] = list(values["ops"])
    if values["sizes"] is not None:
        values["sizes"] = list(values["sizes"])
    return values
