"""Sweep configuration: one frozen dataclass, TOML presets, cross-option checks, and the defaults
that fit the host.

Precedence is defaults < preset file (--config) < command-line flags. Every key of a preset is a
field name of SweepConfig, read by the same declared option (nccl_bench/options.py) as its flag;
an unknown key is an error that names it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from nccl_bench.errors import UserInputError
from nccl_bench.options import MAX_SIZES, MIN_SAMPLE_MS, PRESET, SWEEP_OPTION, SWEEP_OPTIONS, read_values
from nccl_bench.results.whole_file import read_small_file
from nccl_bench.units import op_table
from nccl_bench.units.nccl_env import Assignment, as_texts, variants
from nccl_bench.units.sizes import (
    RangeNames,
    check_range,
    count_sizes,
    format_size,
    geometric_sizes,
    linear_sizes,
)
from nccl_bench.units.split_spec import Split

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")

# Defaults by device. GPU: the range users run nccl-tests with (-b 8 -e 1G -f 2).
# CPU/gloo: 1 KiB..64 MiB, which finishes `sweep --op all_reduce` on 2 ranks in well under a minute.
GPU_SIZE_RANGE = (8, 1024**3)
CPU_SIZE_RANGE = (1024, 64 * 1024**2)


def _default(key: str) -> Any:
    """A field's default: its option's declared default, read as a given value would be."""
    return SWEEP_OPTION[key].read_default()


@dataclass(frozen=True)
class SweepConfig:
    """Every sweep option. None means "choose for this host" (see resolve_sizes and min_sample)."""

    ops: tuple[str, ...] = _default("ops")
    min_bytes: int | None = None
    max_bytes: int | None = None
    step_factor: float | None = None  # None: the option's default, unless step_bytes is given
    step_bytes: int | None = None
    sizes: tuple[int, ...] | None = None
    dtype: str = _default("dtype")
    reduce_op: str = _default("reduce_op")
    root: int = _default("root")
    alltoallv: str = _default("alltoallv")  # all_to_allv's per-peer shares (units/alltoallv.py)
    warmup: int = _default("warmup")
    iters: int | None = _default("iters")  # None = auto: calibrated per size to last min_sample_ms
    min_sample_ms: float | None = None  # None: the option's default for the device
    trials: int = _default("trials")
    agg: str = _default("agg")
    inplace: bool | None = None  # None = both placements where the op has both
    check: bool = _default("check")
    split: Split | None = None  # sub-groups that measure at once (ranks/split.py); None: the whole world
    cycles: int = _default("cycles")  # passes over every point; 0 = until interrupted
    nccl_env: tuple[Assignment, ...] = _default("nccl_env")  # NCCL variables and values: a variant per combination
    nccl_trace: bool = _default("nccl_trace")  # algo/proto columns from NCCL's tuning log (ranks/nccl_trace.py)
    backend: str = _default("backend")
    out: Path | None = None
    results_root: Path = _default("results_root")
    timeout_s: float = _default("timeout_s")
    cuda_graph: int = _default("cuda_graph")
    blocking: bool = _default("blocking")
    peak_gbps: float | None = None
    min_busbw_gbps: float | None = None  # the floor of each op's busbw at its largest measured size
    prom: Path | None = None
    fields_from_flags: tuple[str, ...] = field(default=(), compare=False)


CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(SweepConfig) if f.name != "fields_from_flags")


def option_name(key: str) -> str:
    """The sweep option that sets a SweepConfig field, for error messages."""
    return SWEEP_OPTION[key].name


SIZE_RANGE = RangeNames(*(option_name(key) for key in ("min_bytes", "max_bytes", "step_factor", "step_bytes")))


def normalize(values: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """Validate and convert raw values (from flags, or from the preset file `source`) into field values,
    each by its declared option."""
    return read_values(SWEEP_OPTIONS, values, source)


MAX_PRESET_BYTES = 1 << 20  # a preset is a few lines; anything larger is not one


def load_preset(path: Path) -> dict[str, Any]:
    """Read a TOML preset; keys are SweepConfig field names (ops, min_bytes, iters, ...)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    path = Path(path)
    try:
        data = tomllib.loads(read_small_file(path, MAX_PRESET_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise UserInputError(PRESET.name, f"no such file: {path}") from None
    except OSError as exc:
        raise UserInputError(PRESET.name, f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserInputError(PRESET.name, f"{path} is not valid TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserInputError(PRESET.name, f"{path} is not valid TOML: {exc}") from None
    data.pop("description", None)
    return normalize(data, source=str(path))


def build_config(flags: Mapping[str, Any], preset: Path | None = None) -> SweepConfig:
    """defaults < preset < flags; a flag that is None (or an option given no times) was not given.
    `flags` may hold the command's other options too: the config reads the keys of its own."""
    merged: dict[str, Any] = {}
    if preset is not None:
        merged.update(load_preset(preset))
    given = {key: flags[key] for key in CONFIG_KEYS if flags.get(key) not in (None, (), [])}
    merged.update(normalize(given))
    config = SweepConfig(**merged, fields_from_flags=tuple(given))
    validate(config)
    return config


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
    factor = config.step_factor or SWEEP_OPTION["step_factor"].default
    count = count_sizes(low, high, factor, config.step_bytes, at_most=MAX_SIZES, names=SIZE_RANGE)
    if count > MAX_SIZES:  # refused before a single size is built
        if config.step_bytes is not None:
            option, how, many = SIZE_RANGE.step, f"steps of {format_size(config.step_bytes)}", f"{count:,}"
        else:
            option, how, many = SIZE_RANGE.factor, f"a factor of {factor}", f"more than {MAX_SIZES:,}"
        low_flags, high_flags = ("/".join(SWEEP_OPTION[key].flags) for key in ("min_bytes", "max_bytes"))
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
