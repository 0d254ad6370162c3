"""Parsers for `nvidia-smi nvlink -s`, `nvidia-smi topo -m`, `nvidia-smi -q` and sysfs IB rates.

Pure functions over text. They never raise on unfamiliar output (new drivers, ANSI colour codes,
tabs, "all links are inActive", output clipped with "..."): whatever they cannot read becomes
a warning string, and what they could read is returned marked incomplete, so the caller can fall
back to the next source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CLIP_MARK = re.compile(r"^\s*(\.{2,}|\[\s*\.\.\.\s*\]|…)\s*$")
_GPU_HEADER = re.compile(r"^\s*GPU\s+(\d+)\s*:\s*(.*?)\s*$")
_UUID = re.compile(r"\s*\(UUID:.*$", re.IGNORECASE)
_LINK = re.compile(r"^\s*Link\s+(\d+)\s*:\s*(.*?)\s*$", re.IGNORECASE)
_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*GB/s$", re.IGNORECASE)
_ALL_INACTIVE = re.compile(r"all\s+links\s+are\s+inactive", re.IGNORECASE)


def clean(text: str) -> str:
    """Drop ANSI escape codes and carriage returns; keep tabs (they separate `topo -m` cells)."""
    return _ANSI.sub("", text).replace("\r", "")


@dataclass(frozen=True)
class NvlinkGpu:
    index: int
    name: str | None
    links: tuple[float | None, ...]  # reported GB/s per link; None = inactive
    complete: bool  # False when the output was clipped inside this GPU's list


@dataclass(frozen=True)
class NvlinkStatus:
    gpus: tuple[NvlinkGpu, ...]
    all_inactive: bool  # nvidia-smi said "all links are inActive"
    warnings: tuple[str, ...]


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Per-GPU link rates from `nvidia-smi nvlink -s` (`--status`)."""
    gpus: list[NvlinkGpu] = []
    warnings: list[str] = []
    current: dict | None = None
    unknown_lines = 0
    all_inactive = False

    def close() -> None:
        if current is not None:
            gpus.append(NvlinkGpu(current["index"], current["name"], tuple(current["links"]),
                                  current["complete"]))

    for raw in clean(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        if _ALL_INACTIVE.search(line):
            all_inactive = True
            continue
        if _CLIP_MARK.match(line):
            if current is not None:
                current["complete"] = False
            where = "before the first GPU shown" if current is None else f"inside GPU {current['index']}"
            warnings.append(f"nvidia-smi nvlink -s: output clipped {where}")
            continue
        header = _GPU_HEADER.match(line)
        if header:
            close()
            name = _UUID.sub("", header.group(2)).strip() or None
            current = {"index": int(header.group(1)), "name": name, "links": [], "complete": True}
            continue
        link = _LINK.match(line)
        if link and current is not None:
            current["links"].append(_link_rate(link.group(2), f"GPU {current['index']} link {link.group(1)}", warnings))
            continue
        unknown_lines += 1
    close()
    if unknown_lines:
        warnings.append(f"nvidia-smi nvlink -s: ignored {unknown_lines} unrecognised line(s)")
    if all_inactive:
        warnings.append("nvidia-smi nvlink -s: reports that all links are inactive")
    return NvlinkStatus(tuple(gpus), all_inactive, tuple(warnings))


def _link_rate(value: str, where: str, warnings: list[str]) -> float | None:
    """GB/s of an active link; None for an inactive one, or an unreadable state (with a warning)."""
    rate = _RATE.match(value)
    if rate and float(rate.group(1)) > 0:
        return float(rate.group(1))
    if not (rate or "inactive" in value.lower() or "down" in value.lower()):
        warnings.append(f"nvidia-smi nvlink -s: unreadable state {value!r} for {where}, counted as inactive")
    return None


@dataclass(frozen=True)
class TopoGpu:
    index: int
    nv_counts: tuple[int, ...]  # NV# to each GPU peer that the row shows (0 = no NVLink to it)
    complete: bool  # False when the row had fewer cells than GPU columns


@dataclass(frozen=True)
class TopoMatrix:
    gpu_count: int  # GPU columns in the header
    gpus: tuple[TopoGpu, ...]
    warnings: tuple[str, ...]


def parse_topo_matrix(text: str) -> TopoMatrix:
    """NVLink counts between GPUs from `nvidia-smi topo -m` (spaces or tabs, NICs or not)."""
    warnings: list[str] = []
    columns: list[str] | None = None
    gpus: list[TopoGpu] = []
    for raw in clean(text).splitlines():
        tokens = raw.split()
        if not tokens:
            continue
        if columns is None:
            if tokens[0] == "GPU0":
                columns = _topo_columns(tokens)
            continue
        row = re.fullmatch(r"GPU(\d+)", tokens[0])
        if not row:
            continue
        counts, complete = _topo_row(tokens[0], tokens[1:], columns)
        if not complete:
            warnings.append(f"nvidia-smi topo -m: row GPU{row.group(1)} is clipped")
        gpus.append(TopoGpu(int(row.group(1)), tuple(counts), complete))
    if columns is None:
        warnings.append("nvidia-smi topo -m: no GPU0 header found")
        return TopoMatrix(0, (), tuple(warnings))
    gpu_count = sum(1 for c in columns if re.fullmatch(r"GPU\d+", c))
    missing = gpu_count - len(gpus)
    if missing > 0:
        warnings.append(f"nvidia-smi topo -m: {missing} GPU row(s) missing (clipped output?)")
    return TopoMatrix(gpu_count, tuple(gpus), tuple(warnings))


def _topo_columns(tokens: list[str]) -> list[str]:
    """The header's device columns (GPUs, NICs), up to the affinity columns."""
    columns = []
    for token in tokens:
        if token in ("CPU", "NUMA"):
            break
        columns.append(token)
    return columns


def _topo_row(name: str, cells: list[str], columns: list[str]) -> tuple[list[int], bool]:
    """NV# to each other GPU column of one GPU's row, and whether the row reached every column."""
    counts: list[int] = []
    for col, column in enumerate(columns):
        if not re.fullmatch(r"GPU\d+", column) or column == name:
            continue
        if col >= len(cells):
            return counts, False
        nv = re.fullmatch(r"NV(\d+)", cells[col])
        counts.append(int(nv.group(1)) if nv else 0)
    return counts, True


@dataclass(frozen=True)
class QueryGpu:
    index: int  # order in the output, which is nvidia-smi's index order
    name: str | None
    bus_id: str | None
    pcie_gen_max: int | None
    pcie_gen_current: int | None
    pcie_width_max: int | None
    pcie_width_current: int | None


def _int_or_none(value: str) -> int | None:
    match = re.match(r"^\s*(\d+)\s*x?\s*$", value)
    return int(match.group(1)) if match else None


def _query_line(gpu: dict, section: str | None, line: str) -> str | None:
    """Read one line of a GPU's section into `gpu`; returns the PCIe sub-section the next line is in."""
    if line == "PCIe Generation":
        return "gen"
    if line == "Link Width":
        return "width"
    if ":" not in line:
        return section if line == "GPU Link Info" else None
    key, _, value = line.partition(":")
    key, value = key.strip(), value.strip()
    if key == "Product Name" and gpu["name"] is None:
        gpu["name"] = value or None
    elif section and key in ("Max", "Current"):
        gpu[("gen_" if section == "gen" else "width_") + ("max" if key == "Max" else "cur")] = _int_or_none(value)
    elif section and key not in ("Device Current", "Device Max", "Host Max"):
        return None
    return section


def parse_query(text: str) -> tuple[tuple[QueryGpu, ...], tuple[str, ...]]:
    """Product name and PCIe generation/width (max and current) per GPU from `nvidia-smi -q`."""
    gpus: list[dict] = []
    section: str | None = None  # "gen" or "width" inside GPU Link Info
    for raw in clean(text).splitlines():
        line = raw.strip()
        if re.match(r"^GPU\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$", line):
            gpus.append({"bus_id": line.split()[1], "name": None, "gen_max": None, "gen_cur": None,
                         "width_max": None, "width_cur": None})
            section = None
            continue
        if gpus:
            section = _query_line(gpus[-1], section, line)
    warnings: list[str] = []
    if not gpus:
        warnings.append("nvidia-smi -q: no GPU section found")
    for i, g in enumerate(gpus):
        if g["gen_max"] is None or g["width_max"] is None:
            warnings.append(f"nvidia-smi -q: no PCIe generation/width for GPU {i}")
    result = tuple(QueryGpu(i, g["name"], g["bus_id"], g["gen_max"], g["gen_cur"], g["width_max"],
                            g["width_cur"]) for i, g in enumerate(gpus))
    return result, tuple(warnings)


def parse_ib_rate_gbps(text: str) -> float | None:
    """Per-direction GB/s from a sysfs IB port rate such as "200 Gb/sec (4X HDR)"; None if unreadable."""
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec", clean(text))
    return float(match.group(1)) / 8 if match else None


@dataclass(frozen=True)
class ListedGpu:
    """One GPU as the driver lists it (`nvidia-smi -L`, or NVML): what a hidden GPU is named by."""

    index: int
    name: str | None
    uuid: str | None


_LISTED_GPU = re.compile(r"^GPU\s+(\d+)\s*:\s*(.*?)\s*(?:\(UUID:\s*([^)\s]+)\s*\))?\s*$")


def parse_gpu_list(text: str) -> tuple[ListedGpu, ...]:
    """GPUs from `nvidia-smi -L` ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"); the MIG devices
    listed under a GPU (indented "MIG ..." lines) are parts of it, not GPUs of their own."""
    found = []
    for line in clean(text).splitlines():
        listed = _LISTED_GPU.match(line)
        if listed:
            found.append(ListedGpu(int(listed.group(1)), listed.group(2) or None, listed.group(3)))
    return tuple(found)


# `nvidia-smi -q` nests sections by indentation; a value line is `Key  : value`, a section header a bare name.
_QUERY_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")
# Clock event reasons that mean the hardware slowed itself (heat, power brake), not a setting or idleness.
HW_SLOWDOWNS = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
# Reasons that say nothing of the GPU's health: an idle GPU clocks down, applications clocks are a setting.
_QUIET_REASONS = ("Idle", "Applications Clocks Setting", "Display Clock Setting")


@dataclass(frozen=True)
class QueryHealth:
    """One GPU's configuration and health as `nvidia-smi -q` reports it; None where it says nothing (or N/A)."""

    index: int
    name: str | None
    memory_mib: int | None  # FB Memory Usage / Total
    ecc_mode: str | None  # ECC Mode / Current: Enabled | Disabled
    ecc_volatile_uncorrectable: int | None  # sum of the Volatile counters whose name says uncorrectable
    clock_reasons: tuple[str, ...]  # active clock event (throttle) reasons, idleness and settings left out
    idle: bool  # the Idle reason is active: the PCIe link may sit at a lower generation to save power
    pcie_gen_max: int | None
    pcie_gen_current: int | None
    pcie_width_max: int | None
    pcie_width_current: int | None


@dataclass(frozen=True)
class QueryFacts:
    driver: str | None
    cuda: str | None  # the highest CUDA version the driver supports
    gpus: tuple[QueryHealth, ...]


def query_sections(text: str) -> tuple[dict[tuple[str, ...], str], list[dict[tuple[str, ...], str]]]:
    """`nvidia-smi -q` as (the values before the first GPU, each GPU's values), keyed by section path:
    ("ECC Errors", "Volatile", "DRAM Uncorrectable") -> "0". Indentation decides nesting."""
    top: dict[tuple[str, ...], str] = {}
    gpus: list[dict[tuple[str, ...], str]] = []
    stack: list[tuple[int, str]] = []  # (indent, section name) of the open sections
    for raw in clean(text).expandtabs(4).splitlines():
        line = raw.strip()
        if not line or line.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip())
        if _QUERY_GPU.match(line):
            gpus.append({})
            stack = [(indent, "")]
            continue
        while stack and stack[-1][0] >= indent and stack[-1][1]:
            stack.pop()
        path = tuple(name for _, name in stack if name)
        if ":" in line:
            key, _, value = line.partition(":")
            (gpus[-1] if gpus else top)[(*path, key.strip())] = value.strip()
        else:
            stack.append((indent, line))
    return top, gpus


def _known(value: str | None) -> str | None:
    return None if value is None or value in ("N/A", "") or value.startswith("[") else value


def _leading_int(value: str | None) -> int | None:
    match = re.match(r"^\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def _gpu_health(index: int, values: dict[tuple[str, ...], str]) -> QueryHealth:
    def get(*path: str) -> str | None:
        return _known(values.get(path))

    counters = [_leading_int(v) for k, v in values.items()
                if len(k) == 3 and k[:2] == ("ECC Errors", "Volatile") and "uncorrectable" in k[2].lower()]
    # Drivers before R470 nest the counts one level deeper: Volatile / Double Bit / Total.
    counters += [_leading_int(v) for k, v in values.items()
                 if k[:3] == ("ECC Errors", "Volatile", "Double Bit") and k[-1] == "Total"]
    known = [c for c in counters if c is not None]
    reasons = [k[-1] for k, v in values.items()
               if k and k[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and len(k) >= 2 and v == "Active"]
    link = ("PCI", "GPU Link Info")
    return QueryHealth(
        index=index, name=get("Product Name"), memory_mib=_leading_int(get("FB Memory Usage", "Total")),
        ecc_mode=get("ECC Mode", "Current"), ecc_volatile_uncorrectable=sum(known) if known else None,
        clock_reasons=tuple(r for r in reasons if r not in _QUIET_REASONS), idle="Idle" in reasons,
        pcie_gen_max=_leading_int(get(*link, "PCIe Generation", "Max")),
        pcie_gen_current=_leading_int(get(*link, "PCIe Generation", "Current")),
        pcie_width_max=_leading_int(get(*link, "Link Width", "Max")),
        pcie_width_current=_leading_int(get(*link, "Link Width", "Current")),
    )


def parse_query_facts(text: str) -> QueryFacts:
    """Driver and CUDA versions and each GPU's configuration and health from `nvidia-smi -q`."""
    top, gpus = query_sections(text)
    return QueryFacts(_known(top.get(("Driver Version",))), _known(top.get(("CUDA Version",))),
                      tuple(_gpu_health(i, values) for i, values in enumerate(gpus)))
