"""GPUs the driver shows but CUDA does not: a run on such a host would measure gloo on the CPU while
the GPUs sit idle, so the cause is said before measuring (a warning, or the refusal of --backend nccl).

The driver's list comes from NVML, else `nvidia-smi -L`, neither of which needs CUDA; the causes
are read from this process: the torch build, CUDA_VISIBLE_DEVICES, the device files' permissions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from nccl_bench.hardware.host import run_nvidia_smi
from nccl_bench.hardware.nvidia_smi import ListedGpu, parse_gpu_list
from nccl_bench.hardware.nvml import list_nvml_gpus

# `nvidia-smi -L` answers in well under a second on a healthy host; a hung driver must not hold a
# run's start for the minute that the slower queries are given.
LIST_TIMEOUT_S = 10.0
VISIBLE = "CUDA_VISIBLE_DEVICES"


def listed_gpus(nvidia_smi: str = "nvidia-smi") -> tuple[tuple[ListedGpu, ...], str]:
    """The GPUs the driver lists and who listed them ("NVML", "nvidia-smi"); () when neither answers."""
    gpus, _ = list_nvml_gpus()
    if gpus:
        return gpus, "NVML"
    text, _ = run_nvidia_smi(nvidia_smi, "-L", timeout_s=LIST_TIMEOUT_S)
    return (parse_gpu_list(text) if text else ()), "nvidia-smi"


def hidden_gpus_text(environ: Mapping[str, str], cuda_build: str | None, nvidia_smi: str = "nvidia-smi",
                     dev_root: str | Path = "/dev") -> str | None:
    """Called only where CUDA sees no GPU: the GPUs the driver lists anyway and why CUDA does not see them,
    in one clause; None where the driver lists none either (a host without GPUs)."""
    gpus, source = listed_gpus(nvidia_smi)
    if not gpus:
        return None
    names = sorted({gpu.name for gpu in gpus if gpu.name})
    what = f"{len(gpus)} GPU(s)" + (f" ({', '.join(names)})" if names else "")
    causes = hidden_causes(gpus, environ, cuda_build, dev_root)
    return f"{what} listed by {source} but hidden from CUDA: {'; '.join(causes)}"


def hidden_causes(gpus: tuple[ListedGpu, ...], environ: Mapping[str, str], cuda_build: str | None,
                  dev_root: str | Path) -> list[str]:
    """Every cause found, each with what to do; at least one line, so the warning never ends in a colon."""
    causes = []
    if cuda_build is None:
        causes.append("this torch is a CPU build, without CUDA (install a CUDA build of torch)")
    visible = visible_devices_problem(environ.get(VISIBLE), gpus)
    if visible is not None:
        causes.append(visible)
    denied = denied_device_files(Path(dev_root))
    if denied:
        causes.append(f"this user may not open {', '.join(denied)} (the device files' permissions)")
    if not causes:
        causes.append(f"CUDA did not start on them (torch's CUDA {cuda_build}: is the driver older than it?)")
    return causes


def visible_devices_problem(value: str | None, gpus: tuple[ListedGpu, ...]) -> str | None:
    """CUDA_VISIBLE_DEVICES that shows CUDA no GPU, said with its value; None where it is unset or names one.

    CUDA reads the list up to its first entry that names no device, so a list whose first entry names none
    hides every GPU. An entry is an index, or a GPU's UUID (or a unique start of one); MIG devices, which
    the driver's GPU list does not name, are taken as named."""
    if value is None:
        return None
    first = value.split(",", 1)[0].strip()
    if not first:
        return f"{VISIBLE} is set empty, which hides every GPU (unset it, or name a GPU)"
    if first.isdigit() and int(first) < len(gpus):
        return None
    if first.startswith("MIG-"):
        return None
    uuids = [gpu.uuid for gpu in gpus if gpu.uuid]
    if first.startswith("GPU-") and (not uuids or any(uuid.startswith(first) for uuid in uuids)):
        return None
    indices = "0" if len(gpus) == 1 else f"0 to {len(gpus) - 1}"
    return f"{VISIBLE}={value} names none of them (unset it, or name one by its index, {indices}, or its UUID)"


def denied_device_files(dev_root: Path) -> list[str]:
    """The NVIDIA device files this process may not open for reading and writing, as CUDA opens them."""
    files = [dev_root / "nvidiactl", dev_root / "nvidia-uvm", *sorted(dev_root.glob("nvidia[0-9]*"))]
    return [str(path) for path in files if path.exists() and not os.access(path, os.R_OK | os.W_OK)]
