"""This host's GPU configuration and health, and its RDMA ports, for the doctor's configuration phase.

Sources, each fact marked with its own: `nvidia-smi -q` (driver and CUDA versions, GPU model, memory,
ECC mode and volatile uncorrectable counts, clock event reasons, PCIe generation and width), NVML
when nvidia-ml-py is installed (NVLink states, PCIe; it wins over nvidia-smi for those), `nvidia-smi
nvlink -s` otherwise, /proc/driver/nvidia (the driver version and GPU models when nvidia-smi cannot
answer), /sys/class/infiniband (RDMA ports). Every reader returns what it could read and notes what
it could not; nothing here raises, and the executable and roots are parameters so tests can point
them at fixtures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from nccl_bench.hardware.host import proc_driver_version, proc_gpu_models, run_nvidia_smi
from nccl_bench.hardware.nvidia_smi import HW_SLOWDOWNS, parse_nvlink_status, parse_query_facts
from nccl_bench.hardware.nvml import probe_nvml

SOURCE_QUERY = "nvidia-smi -q"
SOURCE_NVLINK = "nvidia-smi nvlink -s"
SOURCE_NVML = "nvml"
SOURCE_PROC = "/proc/driver/nvidia"
SOURCE_SYSFS = "/sys/class/infiniband"
# A healthy nvidia-smi answers `-q` in about a second; one that hangs is a finding about its host, and
# the phase must end well inside the doctor's deadline (--timeout, 300 s by default) to report it.
SMI_TIMEOUT_S = 15.0
ANSWERED = "answered"


@dataclass(frozen=True)
class GpuHealth:
    """One GPU as the configuration phase sees it; None where no source said."""

    index: int
    name: str | None
    memory_mib: int | None
    ecc_mode: str | None
    ecc_uncorrectable: int | None  # volatile (since the driver loaded) uncorrectable ECC errors
    nvlinks_up: int | None
    nvlinks_down: int | None
    pcie_gen_max: int | None
    pcie_gen_current: int | None
    pcie_width_max: int | None
    pcie_width_current: int | None
    idle: bool  # an idle GPU may lower its PCIe generation to save power: not a downtrained link
    clock_reasons: tuple[str, ...]  # active clock event reasons other than idleness and settings
    sources: tuple[str, ...]


@dataclass(frozen=True)
class RdmaPort:
    name: str  # mlx5_0/1
    state: str  # ACTIVE, DOWN, INIT ... (the state file's word)
    rate: str | None  # "400 Gb/sec (4X NDR)"


@dataclass(frozen=True)
class HostHardware:
    smi: str  # ANSWERED, or why `nvidia-smi -q` did not (not found, failed, timed out)
    driver: tuple[str, str] | None  # (version, source)
    cuda_driver: tuple[str, str] | None  # the CUDA version the driver supports, (version, source)
    gpus: tuple[GpuHealth, ...]
    rdma: tuple[RdmaPort, ...]
    notes: tuple[str, ...]  # what could not be read, and why


def hw_slowdowns(gpu: GpuHealth) -> tuple[str, ...]:
    """The GPU's active reasons that are the hardware protecting itself (heat, power brake)."""
    return tuple(r for r in gpu.clock_reasons if r in HW_SLOWDOWNS)


def read_rdma_ports(sysfs_root: str | Path = "/sys") -> tuple[RdmaPort, ...]:
    """Every RDMA port under class/infiniband, active or not, with its state word and rate."""
    ports = []
    for port_dir in sorted(Path(sysfs_root, "class", "infiniband").glob("*/ports/*")):
        state = _read(port_dir / "state")
        # The state file reads "4: ACTIVE": the word is what an operator knows.
        word = state.split(":", 1)[-1].strip() if state else "unreadable"
        rate = _read(port_dir / "rate")
        ports.append(RdmaPort(f"{port_dir.parent.parent.name}/{port_dir.name}", word or "unreadable",
                              rate.strip() if rate else None))
    return tuple(ports)


def read_host_hardware(nvidia_smi: str = "nvidia-smi", sysfs_root: str | Path = "/sys",
                       proc_root: str | Path = "/proc", use_nvml: bool = True,
                       timeout_s: float = SMI_TIMEOUT_S) -> HostHardware:
    """This host's GPUs and RDMA ports from every source that answers; each nvidia-smi call given up
    after timeout_s."""
    notes: list[str] = []
    driver = cuda = None
    gpus: list[GpuHealth] = []
    text, reason = run_nvidia_smi(nvidia_smi, "-q", timeout_s=timeout_s)
    if text is not None:
        facts = parse_query_facts(text)
        driver = (facts.driver, SOURCE_QUERY) if facts.driver else None
        cuda = (facts.cuda, SOURCE_QUERY) if facts.cuda else None
        gpus = [GpuHealth(g.index, g.name, g.memory_mib, g.ecc_mode, g.ecc_volatile_uncorrectable, None, None,
                          g.pcie_gen_max, g.pcie_gen_current, g.pcie_width_max, g.pcie_width_current, g.idle,
                          g.clock_reasons, (SOURCE_QUERY,)) for g in facts.gpus]
    else:
        notes.append(reason or f"{nvidia_smi} -q: no output")
    gpus = _with_links(gpus, nvidia_smi, use_nvml, notes, timeout_s)
    if driver is None and (version := proc_driver_version(proc_root)):
        driver = (version, SOURCE_PROC)
    if not gpus:
        gpus = [GpuHealth(i, name, None, None, None, None, None, None, None, None, None, False, (), (SOURCE_PROC,))
                for i, name in enumerate(proc_gpu_models(proc_root))]
    smi = ANSWERED if text is not None else (reason or "no output")
    return HostHardware(smi, driver, cuda, tuple(gpus), read_rdma_ports(sysfs_root), tuple(notes))


def _with_links(gpus: list[GpuHealth], nvidia_smi: str, use_nvml: bool, notes: list[str],
                timeout_s: float) -> list[GpuHealth]:
    """NVLink states (and PCIe from NVML, which reads the link itself) added to each GPU by index."""
    if use_nvml:
        nvml_gpus, reason = probe_nvml()
        if nvml_gpus:
            return _merge_nvml(gpus, nvml_gpus)
        notes.append(reason or "NVML: no GPU")
    if not gpus:
        return gpus
    text, reason = run_nvidia_smi(nvidia_smi, "nvlink", "-s", timeout_s=timeout_s)
    if text is None:
        notes.append(reason or f"{nvidia_smi} nvlink -s: no output")
        return gpus
    status = {g.index: g for g in parse_nvlink_status(text).gpus}
    merged = []
    for gpu in gpus:
        links = status.get(gpu.index)
        if links is None or not links.complete:
            merged.append(gpu)
            continue
        up = sum(rate is not None for rate in links.links)
        merged.append(replace(gpu, nvlinks_up=up, nvlinks_down=len(links.links) - up,
                               sources=(*gpu.sources, SOURCE_NVLINK)))
    return merged


def _merge_nvml(gpus: list[GpuHealth], nvml_gpus) -> list[GpuHealth]:
    by_index = {g.index: g for g in gpus}
    merged = []
    for n in nvml_gpus:
        base = by_index.get(n.index) or GpuHealth(n.index, n.name, None, None, None, None, None, None, None, None,
                                                  None, False, (), ())
        up = sum(n.link_states)
        merged.append(replace(
            base, name=base.name or n.name, nvlinks_up=up, nvlinks_down=len(n.link_states) - up,
            pcie_gen_max=n.pcie_gen_max, pcie_gen_current=n.pcie_gen_current, pcie_width_max=n.pcie_width_max,
            pcie_width_current=n.pcie_width_current, sources=(*base.sources, SOURCE_NVML)))
    return merged


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None
