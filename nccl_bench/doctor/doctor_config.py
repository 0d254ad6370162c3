"""The doctor's configuration: the frozen DoctorConfig, its defaults, and the message size it uses.

Every value is checked by the doctor's options as declared in nccl_bench/options.py, with the same
parsers as the sweep's, and every default is the option's declared one. Plain code without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_bench.options import DOCTOR_ELEMENT_BYTES, DOCTOR_OPTION, DOCTOR_OPTIONS, DOCTOR_SIZE_BYTES, read_values

ELEMENT_BYTES = DOCTOR_ELEMENT_BYTES  # float32 buffers


def _default(key: str) -> Any:
    """A field's default: its option's declared default, read as a given value would be."""
    return DOCTOR_OPTION[key].read_default()


@dataclass(frozen=True)
class DoctorConfig:
    phases: tuple[str, ...] = _default("phases")
    size_bytes: int | None = None  # None: the option's default for the device
    iters: int = _default("iters")
    samples: int = _default("samples")
    warmup: int = _default("warmup")
    quick: bool = _default("quick")
    quick_rounds: int = _default("quick_rounds")
    seed: int = _default("seed")
    tolerance: float = _default("tolerance")
    expect_gbps: float | None = None
    expect_hosts: tuple[str, ...] | None = None  # None: SLURM_JOB_NODELIST under srun, else nobody expected
    exclude_file: Path | None = None
    backend: str = _default("backend")
    out: Path | None = None
    results_root: Path = _default("results_root")
    timeout_s: float = _default("timeout_s")
    prom: Path | None = None


def build_config(**values: Any) -> DoctorConfig:
    """Each value checked by its declared option; values that are None take the defaults. The command's
    other options may be among `values`: the config reads the keys of its own."""
    own = {option.key for option in DOCTOR_OPTIONS}
    return DoctorConfig(**read_values(DOCTOR_OPTIONS, {k: v for k, v in values.items() if k in own and v is not None}))


def resolve_size(config: DoctorConfig, on_gpu: bool) -> int:
    """The message size, rounded down to whole float32 elements."""
    size = config.size_bytes or (DOCTOR_SIZE_BYTES.gpu if on_gpu else DOCTOR_SIZE_BYTES.cpu)
    return size - size % ELEMENT_BYTES
