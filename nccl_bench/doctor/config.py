"""The doctor's configuration: its defaults, the frozen DoctorConfig, and the message size it uses.

Every value is checked by the doctor's options as declared in nccl_bench/options.py, with the same
parsers as the sweep's. Plain code without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_bench.options import DOCTOR_ELEMENT_BYTES, DOCTOR_OPTION, DOCTOR_OPTIONS, PHASES, read_values

# One large-ish message per measurement. GPU: where NVLink and IB reach their plateau in
# nccl-tests. CPU/gloo: big enough that a pair exchange is bandwidth-bound (not latency-bound)
# on a veth link, small enough that a shaped link of a few hundred Mbit/s still takes < 0.2 s.
GPU_SIZE_BYTES = 256 * 1024**2
CPU_SIZE_BYTES = 4 * 1024**2
DEFAULT_ITERS = 4  # exchanges per sample
DEFAULT_SAMPLES = 3  # samples per measurement; verdicts judge the fastest, so a disturbed one costs nothing
DEFAULT_WARMUP = 1  # untimed exchanges first: connection set-up and first-touch pages
QUICK_ROUNDS = 3  # random pairings in --quick: each node meets up to 3 partners
DEFAULT_TOLERANCE = 0.20  # healthy simulated hosts stayed within 15% of their run's median (docs/doctor.md)
ELEMENT_BYTES = DOCTOR_ELEMENT_BYTES  # float32 buffers


@dataclass(frozen=True)
class DoctorConfig:
    phases: tuple[str, ...] = PHASES
    size_bytes: int | None = None  # None: GPU_SIZE_BYTES or CPU_SIZE_BYTES
    iters: int = DEFAULT_ITERS
    samples: int = DEFAULT_SAMPLES
    warmup: int = DEFAULT_WARMUP
    quick: bool = False
    quick_rounds: int = QUICK_ROUNDS
    seed: int = 0
    tolerance: float = DEFAULT_TOLERANCE
    expect_gbps: float | None = None
    expect_hosts: tuple[str, ...] | None = None  # None: SLURM_JOB_NODELIST under srun, else nobody expected
    exclude_file: Path | None = None
    backend: str = "auto"
    out: Path | None = None
    results_root: Path = Path("results")
    timeout_s: float = 300.0
    prom: Path | None = None


def parse_phases(values: list[str] | None) -> tuple[str, ...]:
    """--phase may repeat or hold commas; 'all' (or nothing) means every phase; PHASES order."""
    return DOCTOR_OPTION["phases"].read(values)


def build_config(**values: Any) -> DoctorConfig:
    """Each value checked by its declared option; values that are None take the defaults."""
    return DoctorConfig(**read_values(DOCTOR_OPTIONS, {k: v for k, v in values.items() if v is not None}))


def resolve_size(config: DoctorConfig, on_gpu: bool) -> int:
    """The message size, rounded down to whole float32 elements."""
    size = config.size_bytes or (GPU_SIZE_BYTES if on_gpu else CPU_SIZE_BYTES)
    return size - size % ELEMENT_BYTES
