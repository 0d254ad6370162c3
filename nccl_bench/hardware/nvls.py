"""NVLink SHARP (NVLS) told apart from a bus bandwidth above the links' rate.

On an NVSwitch system NCCL (2.17+, Hopper and later) can run all_reduce as NVLS: the switch does the
reduction, so each GPU sends its data once and reads the result once, and the busbw nccl-tests'
formula gives (2(n-1)/n x size / time) exceeds what the GPU's links carry per direction (8x H100:
~480 GB/s against 450). Such a number is not a measurement error; NCCL_NVLS_ENABLE=0 measures the
ring the formula describes.

Whether GPUs sit behind a switch is read from `nvidia-smi topo -m`: behind an NVSwitch every peer
shows all of a GPU's links (NV18 to each of 7 peers on an HGX H100), which no direct mesh can.
"""

from __future__ import annotations

from nccl_bench.hardware.host import run_nvidia_smi
from nccl_bench.hardware.known_gpus import MAX_NVLINKS_PER_GPU
from nccl_bench.hardware.nvidia_smi import TopoMatrix, parse_topo_matrix
from nccl_bench.units.op_table import OPS

NVLS_FLAG = "above_link_peak_nvls"  # a row's flag: busbw above the link peak on an NVSwitch system
# the ops NVLS lifts above the links' rate in nccl-tests' busbw
NVLS_OPS = tuple(name for name, c in OPS.items() if c.nvls_above_links)


def switched(matrix: TopoMatrix, max_links: int = MAX_NVLINKS_PER_GPU) -> bool | None:
    """True when some GPU shows more NVLinks to its peers together than one GPU can have (a switch);
    False for a direct mesh or no NVLink; None without two GPUs to judge by."""
    rows = [gpu.nv_counts for gpu in matrix.gpus if gpu.nv_counts]
    if matrix.gpu_count < 2 or not rows:
        return None
    return any(sum(counts) > max_links and sum(1 for n in counts if n) > 1 for counts in rows)


def probe_nvswitch(nvidia_smi: str = "nvidia-smi") -> bool | None:
    """Whether this host's GPUs sit behind an NVSwitch (None: nvidia-smi cannot say). Never raises."""
    try:
        text, _reason = run_nvidia_smi(nvidia_smi, "topo", "-m")
        return None if text is None else switched(parse_topo_matrix(text))
    except Exception:  # a note is a nicety, never a reason to abort a sweep
        return None


def nvls_likely(op: str, pct_of_peak: float | None, nvswitch: bool | None) -> bool:
    """A busbw above the links' per-direction peak is NVLS's doing, not an error, on a switched system."""
    return bool(nvswitch) and op in NVLS_OPS and pct_of_peak is not None and pct_of_peak > 100


def nvls_sentence(op: str, top_pct: float) -> str:
    """What the end of a sweep says instead of a bare %peak above 100."""
    return (f"{op} busbw reaches {top_pct:.0f}% of the NVLink per-direction peak on a system with NVSwitch: "
            "NVLink SHARP (NVLS) is the likely cause (the switch reduces, so each GPU sends and receives its data "
            "once); NCCL_NVLS_ENABLE=0 measures the ring that busbw's formula describes")
