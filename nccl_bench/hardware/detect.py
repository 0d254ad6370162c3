"""The reference peak that bus bandwidth is compared with, read from the hardware.

Rule: busbw (nccl-tests' per-rank, per-direction figure) is compared with the per-direction
total of the ACTIVE links of the slowest GPU: NVLink links that are up x data rate per link per
direction, else the GPU's PCIe link (generation x width, per direction). Across nodes the
ceiling is min(intra-node peak, active NIC bandwidth per rank). On a host without GPUs (gloo on
CPU tensors) it is the measured host memory copy rate (see `host.measure_memcpy`).

Sources, in order: NVML (nvidia-ml-py, optional) -> nvidia-smi (`nvlink -s`, `topo -m`, `-q`)
-> the known-GPU table (known_gpus.py) by product name. GPUs are found without torch.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench.hardware.host import (
    MEMCPY_METHOD,
    NicPort,
    measure_memcpy,
    proc_gpu_models,
    read_nic_ports,
    run_nvidia_smi,
)
from nccl_bench.hardware.known_gpus import (
    known_gpu,
    link_rate,
    links_from_topology,
    pcie_gbps,
)
from nccl_bench.hardware.nvidia_smi import (
    NvlinkGpu,
    QueryGpu,
    TopoGpu,
    parse_nvlink_status,
    parse_query,
    parse_topo_matrix,
)
from nccl_bench.hardware.nvml import probe_nvml

SOURCE_NVML = "nvml"
SOURCE_SMI = "nvidia-smi"
SOURCE_TABLE = "known-gpu-table"
SOURCE_MEMCPY = "host-memcpy"


@dataclass(frozen=True)
class Peak:
    peak_gbps: float  # per-direction bus-bandwidth ceiling to compare busbw with, 1e9 B/s
    source: str  # "nvml", "nvidia-smi", "known-gpu-table", "host-memcpy", or "a+b"
    label: str  # human text, e.g. "NVLink4 x18 active, 25 GB/s/link/direction"


@dataclass(frozen=True)
class GpuLimits:
    """One GPU's links. Rates are per direction, 1e9 B/s; None = unknown."""

    index: int
    name: str | None
    nvlink_gen: int | None
    links_active: int | None
    links_total: int | None  # links the source listed (active or not)
    link_reported_gbps: float | None  # per link, as NVML / nvidia-smi print it
    link_gbps: float | None  # per link data rate used for the peak
    nvlink_gbps: float | None  # links_active x link_gbps
    pcie_gen: int | None  # max generation (GPU and slot), as nvidia-smi's "Max"
    pcie_width: int | None
    pcie_gen_current: int | None  # may be lower while idle (power saving)
    pcie_width_current: int | None
    pcie_gbps: float | None  # per direction at pcie_gen x pcie_width
    peak_gbps: float | None  # nvlink_gbps when any link is up, else pcie_gbps
    source: str  # where the link facts came from


@dataclass(frozen=True)
class HostLimits:
    gpus: tuple[GpuLimits, ...]
    source: str | None  # None when no GPU was found
    memcpy_gbps: float | None  # measured only when there is no GPU (or asked for)
    nic_ports: tuple[NicPort, ...]
    warnings: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())  # why earlier sources were skipped
    memcpy_run_gbps: float | None = None  # this run's own fastest copy (memcpy_gbps is the host's record)


def detect_limits(*, use_nvml: bool = True, nvidia_smi: str = "nvidia-smi", sysfs_root: str | Path = "/sys",
                  proc_root: str | Path = "/proc", measure_host: bool | None = None) -> HostLimits:
    """Everything `nccl-bench limits` shows. Never raises for unfamiliar formats.

    measure_host: measure the host memory copy (None = only when no GPU is found).
    """
    warnings: list[str] = []
    notes: list[str] = []
    gpus: tuple[GpuLimits, ...] = ()
    source: str | None = None
    if use_nvml:
        nvml_gpus, reason = probe_nvml()
        if nvml_gpus:
            gpus, source = tuple(_from_nvml(g) for g in nvml_gpus), SOURCE_NVML
        else:
            notes.append(reason or "NVML: no GPU")
    if not gpus:
        gpus, smi_warnings, reason = _from_nvidia_smi(nvidia_smi)
        warnings.extend(smi_warnings)
        if gpus:
            source = SOURCE_SMI
        elif reason:
            notes.append(reason)
    if not gpus:
        models = proc_gpu_models(proc_root)
        gpus = tuple(_from_table(i, name) for i, name in enumerate(models))
        if gpus:
            source = SOURCE_TABLE
            warnings.append("GPU links read from the known-GPU table by model name (no NVML, no nvidia-smi)")
    for gpu in gpus:
        if gpu.peak_gbps is None:
            warnings.append(f"GPU {gpu.index} ({gpu.name or 'unknown model'}): no NVLink or PCIe rate known, "
                            "so no peak for it")
    ports, nic_warnings = read_nic_ports(sysfs_root)
    warnings.extend(nic_warnings)
    if measure_host is None:
        measure_host = not gpus
    memcpy = measure_memcpy() if measure_host else None
    return HostLimits(gpus, source, memcpy and memcpy.gbps, ports, tuple(warnings), tuple(notes),
                      memcpy and memcpy.run_gbps)


def detect_peak(multi_node: bool = False, device_kind: str = "cpu") -> tuple[Peak | None, list[str]]:
    """Return the reference peak and warnings (strings). Never raises for unfamiliar formats."""
    try:
        return peak_from_limits(detect_limits(measure_host=device_kind != "cuda"), multi_node, device_kind)
    except Exception as exc:  # last guard: a peak is a nicety, never a reason to abort a sweep
        return None, [f"peak detection failed ({type(exc).__name__}: {exc}); no pct_of_peak"]


def peak_from_limits(limits: HostLimits, multi_node: bool = False, device_kind: str = "cpu",
                     ranks_per_node: int | None = None) -> tuple[Peak | None, list[str]]:
    """The peak busbw should be compared with, from already gathered limits."""
    warnings = list(limits.warnings)
    if device_kind == "cuda":
        intra = host_gpu_peak(limits.gpus)
        if intra is None:
            warnings.append("no GPU link rate found (" + "; ".join(limits.notes or ("no GPU",)) + ")")
            return None, warnings
    else:
        if limits.memcpy_gbps is None:
            return None, warnings + ["host memory copy was not measured"]
        intra = Peak(limits.memcpy_gbps, SOURCE_MEMCPY, f"host memory copy ({MEMCPY_METHOD})")
    if not multi_node:
        return intra, warnings
    if ranks_per_node is None:
        ranks_per_node = _ranks_per_node(limits, device_kind)
    nic_total = sum(p.gbps for p in limits.nic_ports)
    if nic_total <= 0:
        warnings.append("multi-node run but no active InfiniBand/RoCE/Ethernet port found in sysfs; "
                        "peak is the intra-node one")
        return intra, warnings
    per_rank = nic_total / ranks_per_node
    kinds = "/".join(sorted({p.kind for p in limits.nic_ports}))
    nic_label = (
        f"{kinds} {len(limits.nic_ports)} port(s), {nic_total:g} GB/s per direction / {ranks_per_node} rank(s) per node"
    )
    if per_rank < intra.peak_gbps:
        label = f"inter-node NIC: {nic_label} (intra-node: {intra.label})"
        return Peak(per_rank, f"{intra.source}+sysfs", label), warnings
    return Peak(intra.peak_gbps, f"{intra.source}+sysfs", f"{intra.label} (NICs allow more: {nic_label})"), warnings


def host_gpu_peak(gpus: tuple[GpuLimits, ...]) -> Peak | None:
    """The slowest GPU's peak: every collective waits for it. None if any GPU's peak is unknown."""
    if not gpus or any(g.peak_gbps is None for g in gpus):
        return None
    slowest = min(gpus, key=lambda g: g.peak_gbps)
    sources = "+".join(sorted({g.source for g in gpus}))
    return Peak(slowest.peak_gbps, sources, _gpu_label(slowest))


def _gpu_label(gpu: GpuLimits) -> str:
    if gpu.links_active:
        gen = f"NVLink{gpu.nvlink_gen}" if gpu.nvlink_gen else "NVLink"
        text = f"{gen} x{gpu.links_active} active, {gpu.link_gbps:g} GB/s/link/direction"
        if gpu.link_reported_gbps is not None and abs(gpu.link_reported_gbps - gpu.link_gbps) > 1e-9:
            text += f" ({gpu.link_reported_gbps:g} GB/s signalling as reported)"
        return text
    return f"PCIe Gen{gpu.pcie_gen} x{gpu.pcie_width}, per direction (no active NVLink)"


def _ranks_per_node(limits: HostLimits, device_kind: str) -> int:
    try:
        value = int(os.environ.get("LOCAL_WORLD_SIZE", ""))  # set by torchrun
        if value > 0:
            return value
    except ValueError:
        pass
    return len(limits.gpus) if device_kind == "cuda" and limits.gpus else 1


def _assemble(index: int, name: str | None, links: tuple[bool, ...] | None, reported: float | None,
              gen_hint: int | None, pcie: tuple[int | None, int | None, int | None, int | None],
              source: str) -> GpuLimits:
    """One GpuLimits from link facts; fills unknown link rate / PCIe gen from the known-GPU table."""
    table = known_gpu(name)
    gen, data = (link_rate(reported) if reported is not None else (None, None))
    active = sum(links) if links is not None else None
    # The table's rate stands in only where links are (or may be) up; with none active it is unused,
    # and naming the table as a source would claim a figure the peak does not rest on.
    if data is None and active != 0 and table is not None and table.link_gbps is not None:
        data = table.link_gbps
        source = f"{source}+{SOURCE_TABLE}"
    # A recognised per-link rate says the generation more surely than NVML's version enum, which
    # some drivers report as NVLink 5.0 on H100 (a workaround for it is in public code using pynvml).
    nvlink_gen = gen or gen_hint or (table.nvlink_gen if table else None)
    nvlink = active * data if active and data is not None else (0.0 if active == 0 else None)
    gen_max, gen_cur, width_max, width_cur = pcie
    if gen_max is None and table is not None and table.pcie_gen is not None:
        gen_max, width_max = table.pcie_gen, 16
        if SOURCE_TABLE not in source:
            source = f"{source}+{SOURCE_TABLE}"
    pcie_rate = pcie_gbps(gen_max, width_max)
    # Links up at an unknown rate: the ceiling is unknown, and PCIe would understate it.
    peak = nvlink if active else (None if active is None and links is None and pcie_rate is None else pcie_rate)
    return GpuLimits(index, name, nvlink_gen if active else None, active, len(links) if links is not None else None,
                     reported, data if active else None, nvlink, gen_max, width_max, gen_cur, width_cur,
                     pcie_rate, peak, source)


def _from_nvml(g) -> GpuLimits:
    return _assemble(g.index, g.name, g.link_states, g.link_reported_gbps, g.nvlink_gen,
                     (g.pcie_gen_max, g.pcie_gen_current, g.pcie_width_max, g.pcie_width_current), SOURCE_NVML)


def _from_table(index: int, name: str) -> GpuLimits:
    table = known_gpu(name)
    links = tuple([True] * table.nvlinks) if table else None
    return _assemble(index, name, links, None, None, (None, None, None, None), SOURCE_TABLE)


def _from_nvidia_smi(executable: str) -> tuple[tuple[GpuLimits, ...], list[str], str | None]:
    """GPUs from nvidia-smi's three outputs, each optional; (gpus, warnings, reason if none)."""
    if shutil.which(executable) is None:
        return (), [], f"{executable} not found on PATH"
    status_text, status_err = run_nvidia_smi(executable, "nvlink", "-s")
    topo_text, topo_err = run_nvidia_smi(executable, "topo", "-m")
    query_text, query_err = run_nvidia_smi(executable, "-q")
    errors = [e for e in (status_err, topo_err, query_err) if e]
    if status_text is None and topo_text is None and query_text is None:
        return (), [], "; ".join(errors) or f"{executable}: no output"
    warnings: list[str] = list(errors)
    status, all_inactive = _parse_status(status_text, warnings)
    topo = _parse_topo(topo_text, warnings)
    query: dict[int, QueryGpu] = {}
    if query_text is not None:
        gpus_q, query_warnings = parse_query(query_text)
        warnings.extend(query_warnings)
        query = {g.index: g for g in gpus_q}

    indices = sorted(set(status) | set(topo) | set(query))
    if not indices:
        return (), warnings, f"{executable}: no GPU found in its output"
    # Same machine, same GPUs: a rate or a name seen on one GPU stands for the others.
    seen_rates = [r for g in status.values() for r in g.links if r is not None]
    host_rate = max(seen_rates) if seen_rates else None
    names = [g.name for g in status.values() if g.name] + [g.name for g in query.values() if g.name]
    host_name = names[0] if names else None

    gpus = []
    for i in indices:
        st, q = status.get(i), query.get(i)
        name = (st.name if st else None) or (q.name if q else None) or host_name
        links, rate = _smi_links(i, st, topo.get(i), known_gpu(name), all_inactive, executable, warnings)
        rate = host_rate if rate is None else rate
        pcie = (q.pcie_gen_max, q.pcie_gen_current, q.pcie_width_max, q.pcie_width_current) if q else (None,) * 4
        gpus.append(_assemble(i, name, links, rate if links else None, None, pcie, SOURCE_SMI))
    return tuple(gpus), warnings, None


def _parse_status(text: str | None, warnings: list[str]) -> tuple[dict[int, NvlinkGpu], bool]:
    """`nvlink -s` per GPU index, and whether it said every link is inactive."""
    if text is None:
        return {}, False
    parsed = parse_nvlink_status(text)
    warnings.extend(parsed.warnings)
    return {g.index: g for g in parsed.gpus}, parsed.all_inactive


def _parse_topo(text: str | None, warnings: list[str]) -> dict[int, TopoGpu]:
    """`topo -m` rows per GPU index; a GPU column without a row is an incomplete, empty row."""
    if text is None:
        return {}
    matrix = parse_topo_matrix(text)
    warnings.extend(matrix.warnings)
    topo = {g.index: g for g in matrix.gpus}
    topo.update({i: TopoGpu(i, (), False) for i in range(matrix.gpu_count) if i not in topo})
    return topo


def _smi_links(
    i: int, st: NvlinkGpu | None, tp: TopoGpu | None, table, all_inactive: bool, executable: str, warnings: list[str]
) -> tuple[tuple[bool, ...] | None, float | None]:
    """One GPU's links (True = active) and its own best link rate (None: the host's), from the most
    complete source: a whole `nvlink -s` list, then `topo -m`, then the known-GPU table."""
    if st is not None and st.complete and (st.links or all_inactive):
        rates = [r for r in st.links if r is not None]
        return tuple(r is not None for r in st.links), max(rates) if rates else None
    if tp is not None and tp.complete:
        count = links_from_topology(list(tp.nv_counts), table.nvlinks if table and table.nvlinks else None)
        if st is not None:
            warnings.append(f"GPU {i}: link list clipped, link count taken from topo -m ({count})")
        return tuple([True] * count), None
    if st is not None and table is not None:
        seen_active = sum(r is not None for r in st.links)
        links = tuple([True] * max(table.nvlinks, seen_active))
        warnings.append(f"GPU {i}: link list clipped, assuming all {len(links)} links of a {table.label} are up")
        return links, None
    if st is not None:
        links = tuple(r is not None for r in st.links)
        warnings.append(f"GPU {i}: link list clipped and model unknown; counting only the {sum(links)} links shown")
        return links, None
    if all_inactive:
        return (), None
    if table is not None:
        if table.nvlinks:
            warnings.append(f"GPU {i}: no NVLink state from {executable}; assuming all {table.nvlinks} links "
                            f"of a {table.label} are up ({SOURCE_TABLE})")
        return tuple([True] * table.nvlinks), None
    return None, None
