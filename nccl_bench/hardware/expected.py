"""Expected bus bandwidth: public figures measured on named systems, and which of them fit this one.

The figures are data (expected_busbw.json, shipped with the package), each with its source URL and
the lines it was read from. Matching is conservative: an entry fits only a system with one of its
exact GPU product names, its GPUs per node, its node count, no different NVLink generation and, across
nodes, its NICs. Anything unknown about the system means no match: saying nothing beats a guess.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from nccl_bench.units.nccl_env import enabled_for
from nccl_bench.units.sizes import format_size

if TYPE_CHECKING:
    from nccl_bench.hardware.detect import HostLimits

DATA_FILE = "expected_busbw.json"
SCHEMA_VERSION = 2  # 2: algorithm, nvlink_domain, kind "stated", size_basis "peak"
KINDS = ("measured", "threshold", "stated")
SIZE_BASES = ("row", "sweep_max", "peak")
# NVLink SHARP lifts all_reduce's busbw above what rings reach (8xH100: ~480 against ~370 GB/s), so a
# run known to use rings is compared with ring figures only, and any other run never with them.
ALGORITHMS = ("nvls", "ring", "default")
RING = "ring"
# Drivers before the 470 series printed "A100-SXM4-40GB" where later ones print "NVIDIA A100-SXM4-40GB":
# the same product, so the prefix is not part of the comparison.
_VENDOR_PREFIX = "nvidia "
# NIC rates: sysfs reports Gb/s, NicPort carries GB/s per direction (Gb/s / 8); rates are whole Gb/s.
_BITS_PER_BYTE = 8
_NIC_RATE_TOLERANCE_GBIT = 0.5


@dataclass(frozen=True)
class Nic:
    kind: str  # "InfiniBand", "RoCE" or "Ethernet", as hardware/host.NicPort names them
    ports: int  # per node
    gbit_per_port: float  # Gb/s, as the NIC is sold (400 for NDR)


@dataclass(frozen=True)
class Entry:
    id: str
    system: str  # for people: "8xH100 SXM, Azure ND H100 v5"
    gpu_names: tuple[str, ...]  # as NVML / nvidia-smi report them
    gpus_per_node: int
    nodes: int
    nvlink_gen: int | None  # None: no NVLink
    nvlink_domain: bool  # every node in one NVLink domain (NVL72): no NIC carries the collective
    nic: Nic | None  # None on one node or one NVLink domain
    op: str
    algorithm: str  # "nvls", "ring" or "default" (NCCL's own choice, not stated)
    size_bytes: int  # nccl-tests' size column
    size_basis: str  # "row": the figure is at size_bytes; "sweep_max": best of a sweep up to size_bytes
    busbw_gbps: float  # 1e9 B/s; the low end of a range
    busbw_high_gbps: float | None  # the high end of a range, else None
    kind: str  # "measured" or "threshold"
    nccl_version: str | None
    source_url: str
    quote: tuple[str, ...]  # the source's lines, verbatim
    note: str


@dataclass(frozen=True)
class NicPortRate:
    kind: str
    gbps: float  # per direction, 1e9 B/s (hardware/host.NicPort.gbps)


@dataclass(frozen=True)
class System:
    """What this run or host is. None means unknown, and an unknown field matches nothing it is checked for.

    gpus_per_node: GPUs taking part per node (for `limits`, the GPUs found).
    nvlink_gen: 0 when the GPUs have no active NVLink; None when unknown (then it is not checked).
    nic_ports: active NIC ports of one node; checked only against entries of more than one node.
    """

    gpu_name: str | None
    gpus_per_node: int | None
    nodes: int | None = 1
    nvlink_gen: int | None = None
    nic_ports: tuple[NicPortRate, ...] | None = None

    @classmethod
    def from_limits(cls, limits: HostLimits, nodes: int | None = 1,
                    gpus_per_node: int | None = None) -> System:
        """The system `detect_limits` found; GPUs of different names make the name unknown."""
        gpus = limits.gpus
        names = {g.name for g in gpus}
        name = names.pop() if len(names) == 1 else None
        gens = {0 if g.links_active == 0 else g.nvlink_gen for g in gpus}
        gen = gens.pop() if len(gens) == 1 else None
        ports = tuple(NicPortRate(p.kind, p.gbps) for p in limits.nic_ports)
        count = gpus_per_node if gpus_per_node is not None else (len(gpus) or None)
        return cls(name, count, nodes, gen, ports)


def parse_entries(data: dict[str, Any]) -> tuple[Entry, ...]:
    """Entries from the data file's JSON object; ValueError names the entry and field at fault."""
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{DATA_FILE}: schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    entries = tuple(_entry(raw) for raw in data["entries"])
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{DATA_FILE}: duplicate entry ids")
    return entries


@functools.cache
def load_entries() -> tuple[Entry, ...]:
    """The entries shipped with the package."""
    text = resources.files("nccl_bench.hardware").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return parse_entries(json.loads(text))


def match(system: System, op: str, size_bytes: int | None = None,
          entries: tuple[Entry, ...] | None = None, algorithm: str | None = None) -> list[Entry]:
    """Entries that describe this system and op, closest size first, then measured before thresholds.

    Size rule: with size_bytes (a run's largest measured size) an entry fits when its size is at most
    size_bytes, since busbw only grows towards the large sizes and a figure reached at a larger size
    than the run went to would not be a fair yardstick ("peak": only a run beyond the size the source calls
    too small). Without size_bytes every size fits (`limits`). algorithm: what the run is known to have
    used ("ring": ring figures only; anything else: never a ring figure); None with size_bytes None: all.
    """
    found = [e for e in (load_entries() if entries is None else entries)
             if e.op == op and _size_fits(e, size_bytes) and _fits(e, system)
             and (size_bytes is None and algorithm is None or (e.algorithm == RING) == (algorithm == RING))]
    return sorted(found, key=lambda e: (-e.size_bytes, KINDS.index(e.kind)))


def describe(entry: Entry, measured_gbps: float, size_bytes: int | None = None) -> str:
    """One line: the measured busbw as a share of the entry's figure, and where that figure comes from.

    size_bytes is the measured size (default: the entry's). The share is of the figure's low end and
    rounded down, so a result just short of the figure never reads as 100%.
    """
    size = entry.size_bytes if size_bytes is None else size_bytes
    percent = math.floor(100 * measured_gbps / entry.busbw_gbps)
    figure = f"{entry.busbw_gbps:g}"
    if entry.busbw_high_gbps is not None:
        figure += f"-{entry.busbw_high_gbps:g}"
    what = {"measured": "measured", "threshold": "pass threshold", "stated": "stated peak"}[entry.kind]
    what += {"nvls": " with NVLS", "ring": " with rings"}.get(entry.algorithm, "")
    if entry.size_basis == "sweep_max":
        what += f" up to {format_size(entry.size_bytes)}"
    elif entry.size_basis == "peak":
        what += f" above {format_size(entry.size_bytes)}"
    elif entry.size_bytes != size:
        what += f" at {format_size(entry.size_bytes)}"
    where = "on" if entry.kind == "measured" else "for"
    return (f"{entry.op} {format_size(size)}: {round(measured_gbps, 1):g} GB/s = {percent}% of the {figure} GB/s "
            f"{what} {where} {entry.system} ({entry.source_url})")


@dataclass(frozen=True)
class Yardstick:
    """One op's result at its largest measured size beside the entry it was compared with."""

    op: str
    size_bytes: int
    busbw_gbps: float  # the best placement's busbw at that size
    entry: Entry
    sentence: str  # describe()'s line

    def as_meta(self) -> dict[str, Any]:
        """What meta.json records: the entry used, by id and source, and the figures compared."""
        return {"op": self.op, "size_bytes": self.size_bytes, "busbw_gbps": self.busbw_gbps, "entry": self.entry.id,
                "entry_busbw_gbps": self.entry.busbw_gbps, "entry_busbw_high_gbps": self.entry.busbw_high_gbps,
                "entry_kind": self.entry.kind, "source_url": self.entry.source_url, "sentence": self.sentence}


def yardsticks(system: System | None, measured: Iterable[tuple[str, int, float]],
               entries: tuple[Entry, ...] | None = None, algorithm: str | None = None) -> list[Yardstick]:
    """Per op, in first-seen order, the best busbw at its largest measured size against match()'s first
    entry for that size; an op no entry fits (or an unknown system) gives nothing.

    measured: (op, size_bytes, busbw_gbps) of every row with a busbw.
    """
    if system is None:
        return []
    best: dict[str, tuple[int, float]] = {}
    for op, size, busbw in measured:
        if op not in best or (size, busbw) > best[op]:
            best[op] = (size, busbw)
    found = []
    for op, (size, busbw) in best.items():
        fitting = match(system, op, size, entries, algorithm)
        if fitting:
            found.append(Yardstick(op, size, busbw, fitting[0], describe(fitting[0], busbw, size)))
    return found


def host_entries(limits: HostLimits, nodes: int | None = 1) -> list[Entry]:
    """Every entry, of any op and size, that fits the host `limits` describes (for `limits`)."""
    system = System.from_limits(limits, nodes)
    ops = dict.fromkeys(e.op for e in load_entries())
    return [entry for op in ops for entry in match(system, op)]


def run_algorithm(environ: Mapping[str, str], traced: Iterable[str] = ()) -> str:
    """What a run's all_reduce is known to have used: "ring" when NCCL's trace shows only rings, or its
    environment leaves all_reduce rings and no NVLS (NCCL_ALGO read as NCCL reads it: Ring, Ring,Tree,
    ^NVLS, allreduce:ring; or NCCL_NVLS_ENABLE=0); "nvls" when the trace shows NVLS; else "default".
    NVLSTree, which ^NVLS leaves, runs only across nodes (src/graph/tuning.cc)."""
    seen = {algo.upper() for algo in traced if algo}
    if seen and all(algo == "RING" for algo in seen):
        return RING
    if any(algo.startswith("NVLS") for algo in seen):
        return "nvls"
    enabled = enabled_for(environ.get("NCCL_ALGO", "").strip(), "AllReduce")
    rings = enabled is not None and "Ring" in enabled and "NVLS" not in enabled
    return RING if rings or environ.get("NCCL_NVLS_ENABLE", "").strip() == "0" else "default"


def _size_fits(entry: Entry, size_bytes: int | None) -> bool:
    if size_bytes is None:
        return True
    return entry.size_bytes < size_bytes if entry.size_basis == "peak" else entry.size_bytes <= size_bytes


def normalize_gpu_name(name: str) -> str:
    """Case, runs of spaces and a leading 'NVIDIA ' do not tell products apart."""
    text = " ".join(name.split()).casefold()
    return text.removeprefix(_VENDOR_PREFIX)


def _fits(entry: Entry, system: System) -> bool:
    if system.gpu_name is None or system.gpus_per_node is None or system.nodes is None:
        return False
    if normalize_gpu_name(system.gpu_name) not in {normalize_gpu_name(n) for n in entry.gpu_names}:
        return False
    if (system.gpus_per_node, system.nodes) != (entry.gpus_per_node, entry.nodes):
        return False
    if system.nvlink_gen is not None and system.nvlink_gen != (entry.nvlink_gen or 0):
        return False
    return entry.nodes == 1 or entry.nvlink_domain or _nics_fit(entry.nic, system.nic_ports)


def _nics_fit(nic: Nic | None, ports: tuple[NicPortRate, ...] | None) -> bool:
    if nic is None or ports is None:
        return False
    same_kind = [p for p in ports if p.kind == nic.kind]
    return len(same_kind) == nic.ports and all(
        abs(p.gbps * _BITS_PER_BYTE - nic.gbit_per_port) <= _NIC_RATE_TOLERANCE_GBIT for p in same_kind)


def _entry(raw: dict[str, Any]) -> Entry:
    where = f"{DATA_FILE}: entry {raw.get('id')!r}"
    nic = raw.get("nic")
    entry = Entry(
        id=raw["id"], system=raw["system"], gpu_names=tuple(raw["gpu_names"]),
        gpus_per_node=raw["gpus_per_node"], nodes=raw["nodes"], nvlink_gen=raw.get("nvlink_gen"),
        nvlink_domain=bool(raw.get("nvlink_domain", False)),
        nic=None if nic is None else Nic(nic["kind"], nic["ports"], float(nic["gbit_per_port"])),
        op=raw["op"], algorithm=raw.get("algorithm", ""), size_bytes=raw["size_bytes"], size_basis=raw["size_basis"],
        busbw_gbps=float(raw["busbw_gbps"]),
        busbw_high_gbps=None if raw.get("busbw_high_gbps") is None else float(raw["busbw_high_gbps"]),
        kind=raw["kind"], nccl_version=raw.get("nccl_version"), source_url=raw["source_url"],
        quote=tuple(raw["quote"]), note=raw.get("note", ""),
    )
    problems = [
        (entry.kind not in KINDS, f"kind {entry.kind!r} is not one of {KINDS}"),
        (entry.size_basis not in SIZE_BASES, f"size_basis {entry.size_basis!r} is not one of {SIZE_BASES}"),
        (entry.algorithm not in ALGORITHMS, f"algorithm {entry.algorithm!r} is not one of {ALGORITHMS}"),
        (entry.busbw_gbps <= 0, "busbw_gbps must be positive"),
        (entry.busbw_high_gbps is not None and entry.busbw_high_gbps < entry.busbw_gbps,
         "busbw_high_gbps is below busbw_gbps"),
        (not entry.gpu_names, "no gpu_names"),
        (entry.gpus_per_node < 1 or entry.nodes < 1 or entry.size_bytes < 1, "counts and sizes must be positive"),
        (entry.nodes > 1 and entry.nic is None and not entry.nvlink_domain,
         "an entry of more than one node needs its nic (or nvlink_domain)"),
        (not entry.source_url.startswith("https://") or not entry.quote, "a source_url and a quote are required"),
    ]
    for failed, message in problems:
        if failed:
            raise ValueError(f"{where}: {message}")
    return entry
