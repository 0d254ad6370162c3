"""What the links promise: NVLink and PCIe rates per direction, and a table of known GPUs.

Every figure here is per direction, in 1e9 bytes/s, because busbw is: nccl-tests' busbw counts
the bytes one rank sends (or receives) per second. Marketing totals such as "600 GB/s" (A100),
"900 GB/s" (H100) or "1.8 TB/s" (B200) add both directions and are halved here. An NVLink carries
25 GB/s per direction on NVLink 2-4 ("Each NVLink has a line rate of 25GB/s (in each direction)",
NCCL maintainer, https://github.com/NVIDIA/nccl-tests/issues/149) and 50 GB/s on NVLink 5.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# NVLink generations carry at most 18 links per GPU (H100, B200); used to tell a switched
# `topo -m` (NV12 to every peer) from a direct mesh (NV6 to each of 3 peers).
MAX_NVLINKS_PER_GPU = 18

# Per-link figure that nvidia-smi/NVML report -> (NVLink generation, data rate per direction).
# nvidia-smi prints the signalling rate, which on NVLink 2, 4 and 5 includes line-coding
# overhead above the data rate that NVIDIA's bandwidth totals are built from:
#   20.0   P100, NVLink 1: 4 links, "160 GB/s" bidirectional (Tesla P100 datasheet) -> 20/link/dir
#   25.781 V100 and TU102, NVLink 2: V100 "300 GB/s" over 6 links (V100 datasheet) -> 25/link/dir;
#          reported as 25.781 in https://github.com/Azure/azhpc-diagnostics/issues/73 (V100)
#          and https://github.com/NVIDIA/apex/issues/282 (RTX 2080 Ti)
#   25     A100, NVLink 3: "600 GB/s" over 12 links -> 25/link/dir; reported as 25 in
#          https://github.com/NVIDIA/nccl-tests/issues/228
#   14.062 GA102 (RTX 3090, A6000, A40), NVLink 3 x4 links: "14.0625 GB/sec bandwidth in each
#          direction" (GA102 whitepaper, quoted in https://github.com/huggingface/transformers/issues/9371)
#   26.562 H100/H200/H20, NVLink 4: "900 GB/s" over 18 links -> 25/link/dir ("450GB/s is the line
#          rate", https://github.com/NVIDIA/nccl-tests/issues/212); 26.562 is what nvidia-smi prints
#          for H100 links in public captures (no bug-report capture found for a fixture)
#   53.125 B200/GB200, NVLink 5: "1.8 TB/s" over 18 links -> 50/link/dir; 53.125 reported in
#          https://github.com/NVIDIA/k8s-test-infra/issues/371 (GB200)
_REPORTED_LINK_RATES: tuple[tuple[float, int, float], ...] = (
    (20.0, 1, 20.0),
    (25.781, 2, 25.0),
    (25.0, 3, 25.0),
    (14.062, 3, 14.0625),
    (26.562, 4, 25.0),
    (53.125, 5, 50.0),
)
_RATE_TOLERANCE_GBPS = 0.01  # nvidia-smi rounds to 3 decimals

# PCIe data rate per lane per direction, 1e9 B/s: transfer rate x line-code efficiency / 8.
# Gen1-2 use 8b/10b, Gen3-5 128b/130b (PCI-SIG base specs); Gen6 is PCI-SIG's headline
# 64 GT/s = 128 GB/s per direction at x16 (FLIT overhead not subtracted).
_PCIE_LANE_GBPS = {
    1: 2.5 * 8 / 10 / 8,
    2: 5.0 * 8 / 10 / 8,
    3: 8.0 * 128 / 130 / 8,
    4: 16.0 * 128 / 130 / 8,
    5: 32.0 * 128 / 130 / 8,
    6: 8.0,
}


def link_rate(reported_gbps: float) -> tuple[int | None, float]:
    """(NVLink generation or None, data rate per direction) for a per-link figure from nvidia-smi/NVML.

    An unfamiliar figure is taken as the data rate itself, with no generation.
    """
    for reported, gen, data in _REPORTED_LINK_RATES:
        if abs(reported_gbps - reported) <= _RATE_TOLERANCE_GBPS:
            return gen, data
    return None, reported_gbps


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Per-direction PCIe bandwidth of a gen x width link, or None when either is unknown."""
    if gen is None or width is None or gen not in _PCIE_LANE_GBPS or width <= 0:
        return None
    return _PCIE_LANE_GBPS[gen] * width


def links_from_topology(nv_counts: list[int], max_links: int | None = None) -> int:
    """Links of one GPU from its `topo -m` row (NV# to each peer).

    A direct mesh lists each link once (4x H100: NV6 to 3 peers = 18); behind an NVSwitch every
    peer shows all of the GPU's links (DGX A100: NV12 to 7 peers), so a sum above what one GPU can
    have means switched, and the per-peer figure is the GPU's link count.
    """
    total = sum(nv_counts)
    cap = max_links or MAX_NVLINKS_PER_GPU
    return total if total <= cap else max(nv_counts, default=0)


@dataclass(frozen=True)
class KnownGpu:
    label: str
    nvlink_gen: int | None
    nvlinks: int  # 0 = no NVLink
    link_gbps: float | None  # data rate per link per direction
    pcie_gen: int | None  # host interface of the card, x16 assumed
    source: str  # where the NVLink figure comes from


# Order matters: the first pattern that matches the product name wins, so specific names come
# before the family name they contain (H100 PCIe before H100, H200 before H20).
_KNOWN_GPUS: tuple[tuple[str, KnownGpu], ...] = (
    (r"GB300", KnownGpu("GB300", 5, 18, 50.0, None, "GB300 NVL72: 1.8 TB/s NVLink per GPU")),
    (r"GB200", KnownGpu("GB200", 5, 18, 50.0, None, "GB200 NVL72: 1.8 TB/s NVLink per GPU")),
    (r"B300", KnownGpu("B300", 5, 18, 50.0, None, "HGX B300: 1.8 TB/s NVLink per GPU")),
    (r"B200", KnownGpu("B200", 5, 18, 50.0, None, "HGX B200 datasheet: 1.8 TB/s NVLink per GPU")),
    (r"H200", KnownGpu("H200", 4, 18, 25.0, 5, "H200 datasheet: NVLink 900 GB/s")),
    (r"H800", KnownGpu("H800 SXM", 4, 8, 25.0, 5,
                       "H800: NVLink 400 GB/s bidirectional (https://github.com/deepseek-ai/DeepSeek-V3/issues/28)")),
    (r"\bH20\b", KnownGpu("H20", 4, 18, 25.0, 5,
                          "H20: NVLink 900 GB/s bidirectional (https://github.com/deepseek-ai/DeepEP/issues/16)")),
    (r"H100 NVL", KnownGpu("H100 NVL", 4, 12, 25.0, 5, "H100 NVL product brief: NVLink bridge 600 GB/s")),
    (r"H100.*PCIE", KnownGpu("H100 PCIe", 4, 12, 25.0, 5, "H100 PCIe datasheet: NVLink bridge 600 GB/s")),
    (r"H100", KnownGpu("H100 SXM", 4, 18, 25.0, 5, "H100 SXM datasheet: NVLink 900 GB/s")),
    (r"A800", KnownGpu("A800", 3, 8, 25.0, 4, "A800 datasheet: NVLink 400 GB/s")),
    (r"A100.*PCIE", KnownGpu("A100 PCIe", 3, 12, 25.0, 4, "A100 PCIe product brief: NVLink bridge 600 GB/s")),
    (r"A100", KnownGpu("A100 SXM4", 3, 12, 25.0, 4,
                       "A100 datasheet: NVLink 600 GB/s; 25 GB/s/link/dir per https://github.com/NVIDIA/nccl-tests/issues/149")),
    (r"RTX A6000", KnownGpu("RTX A6000", 3, 4, 14.0625, 4, "RTX A6000 datasheet: NVLink bridge 112.5 GB/s")),
    (r"\bA40\b", KnownGpu("A40", 3, 4, 14.0625, 4, "A40 datasheet: NVLink bridge 112.5 GB/s")),
    (r"RTX 3090", KnownGpu("GeForce RTX 3090", 3, 4, 14.0625, 4,
                           "GA102 whitepaper: 4 links x 14.0625 GB/s/dir (https://github.com/huggingface/transformers/issues/9371)")),
    (r"TITAN RTX|RTX 2080 TI|QUADRO RTX [68]000",
     KnownGpu("TU102 (RTX 2080 Ti / TITAN RTX / Quadro RTX 6000-8000)", 2, 2, 25.0, 3,
              "TU102 NVLink bridge 100 GB/s; 2 links seen in https://github.com/NVIDIA/apex/issues/282")),
    (r"RTX 2080", KnownGpu("GeForce RTX 2080", 2, 1, 25.0, 3, "TU104 NVLink bridge 50 GB/s")),
    (r"V100.*PCIE|V100S", KnownGpu("V100 PCIe", None, 0, None, 3, "V100 PCIe datasheet: no NVLink, PCIe Gen3")),
    (r"V100", KnownGpu("V100 SXM2", 2, 6, 25.0, 3, "V100 SXM2 datasheet: NVLink 300 GB/s")),
    (r"P100.*PCIE", KnownGpu("P100 PCIe", None, 0, None, 3, "P100 PCIe datasheet: no NVLink, PCIe Gen3")),
    (r"P100", KnownGpu("P100 SXM2", 1, 4, 20.0, 3, "P100 SXM2 datasheet: NVLink 160 GB/s")),
    (r"L40S|\bL40\b|RTX 6000 ADA|RTX 4090|\bL4\b|\bA10\b",
     KnownGpu("Ada/Ampere PCIe card without NVLink", None, 0, None, 4, "datasheets: no NVLink, PCIe Gen4 x16")),
    (r"RTX 5090", KnownGpu("GeForce RTX 5090", None, 0, None, 5, "RTX 5090 specs: no NVLink, PCIe Gen5 x16")),
    (r"\bT4\b", KnownGpu("T4", None, 0, None, 3, "T4 datasheet: no NVLink, PCIe Gen3 x16")),
)


def known_gpu(name: str | None) -> KnownGpu | None:
    """The table entry for a product name as nvidia-smi prints it, or None when unfamiliar."""
    if not name:
        return None
    upper = name.upper()
    for pattern, gpu in _KNOWN_GPUS:
        if re.search(pattern, upper):
            return gpu
    return None
