"""What a run's header and meta.json say of it: the facts the life cycle gathers (hosts, devices,
versions, set-up costs), the environment it records, and the name of a rank's device and the versions of
its stack, from torch or, for a run without torch (ranks/star_gather.py), from NVML and torch's files."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nccl_bench.ranks import run_owner

# Variables that steer NCCL and torch's NCCL process group (watchdog, error handling, flight
# recorder); the rest of the environment is never recorded.
RECORDED_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_")
# nccl_bench's own variables share NCCL's prefix but set nothing in NCCL, and one of them (the
# history's URL) may hold a password: never recorded.
OWN_ENV_PREFIX = run_owner.TOOL_ENV_PREFIX


@dataclass(frozen=True)
class RunFacts:
    """What every command's header says of its run, as the life cycle gathered it (Run.facts)."""

    backend: str
    launcher: str
    world_size: int
    hostnames: tuple[str, ...]  # per rank, in rank order
    devices: tuple[str, ...]  # per rank, in rank order
    versions: dict[str, str]
    run_dir: Path | None
    # Set-up costs, the slowest rank's, in seconds: init_s, first_op_s, and split_s where a body adds it.
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        return len(set(self.hostnames))

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host once, sorted."""
        return tuple(sorted(set(self.hostnames)))


def recorded_env(environ) -> dict[str, str]:
    """NCCL's and torch's settings; not nccl_bench's own variables (the history's URL among them)."""
    return {k: v for k, v in sorted(environ.items())
            if k.startswith(RECORDED_ENV_PREFIXES) and not k.startswith(OWN_ENV_PREFIX)}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu: " + (platform.processor() or platform.machine())


def device_name(device: Any, without_torch: bool) -> str:
    """A rank's device as the header names it: CUDA's name of its GPU, or the CPU's model. Without torch,
    NVML's name of the GPU at the device's index (the string CUDA reports, in NVML's order of the GPUs)."""
    if device.type != "cuda":
        return cpu_name()
    if without_torch:
        from nccl_bench.hardware.nvml import list_nvml_gpus

        gpus, why = list_nvml_gpus()
        index = device.index or 0
        return (gpus[index].name or "GPU") if gpus and index < len(gpus) else f"GPU {index} ({why or 'not listed'})"
    import torch

    return torch.cuda.get_device_name(device)


SOURCE_TORCH = "torch"  # a version torch itself reports


def stack_versions(on_gpu: bool, without_torch: bool) -> dict[str, tuple[str, str]]:
    """torch's version and, on GPUs, its CUDA and the NCCL it loaded, each with its source: from torch, or
    without it (hardware/stack.py: the same values from torch/version.py and libnccl)."""
    if without_torch:
        from nccl_bench.hardware import stack

        found = {"torch": stack.torch_version()}
        if on_gpu:
            found.update(cuda=(str(stack.torch_cuda_build()), stack.SOURCE_VERSION_PY), nccl=stack.nccl_version())
        return found
    import torch

    found = {"torch": torch.__version__}
    if on_gpu:
        nccl = torch.cuda.nccl.version()
        found.update(cuda=str(torch.version.cuda),
                     nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl))
    return {key: (value, SOURCE_TORCH) for key, value in found.items()}
