"""The doctor's configuration phase judged: each host's facts against a golden configuration or the
fleet's majority, and each GPU's health on its own. Pure (facts in, suspects out).

A fact the golden configuration (DoctorConfig.expect_config) names is judged against it: a host that
reports another value, or none, is a `config` suspect. Any other fact whose value on a host differs
from the value most hosts share is a `config` suspect naming that host, one line per host and fact
(`node004: driver 580.65.06, 3 others 580.159.04`); with no value shared by more than half the hosts,
one suspect names the split. A difference is a warning about the host, not proof that it is broken (a
variable may be set on purpose): it makes the verdict negative but keeps the host off the exclude
list. Degraded hardware (volatile uncorrectable ECC errors, an NVLink down, a PCIe link below its
maximum generation or width, clocks slowed by the hardware) is a suspect even when the whole fleet
shares it, and its host goes on the exclude list. A result line of NCCL's own diagnostics report
(results/nccl_diag.py) that is not [OK] is a `config` suspect naming the hosts of the ranks it names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from nccl_bench.doctor.doctor_config import ExpectedConfig, option_name
from nccl_bench.doctor.verdicts import Suspect
from nccl_bench.hardware.host_config import GpuHealth, hw_slowdowns
from nccl_bench.results.nccl_diag import DiagFinding
from nccl_bench.units import hostlist

CONFIG = "config"
# Facts a host may simply lack (a variable not set, a port not present): absence is a value to compare.
OPTIONAL_PREFIXES = {"env ": "unset", "rdma ": "absent"}


@dataclass(frozen=True)
class Fact:
    value: str
    source: str  # where the value was read: "nvidia-smi -q", "environment", "torch" ...


@dataclass(frozen=True)
class HostFacts:
    """What one host's first rank contributed to the configuration phase."""

    host: str
    facts: dict[str, Fact]  # compared across the fleet, by name
    gpus: tuple[GpuHealth, ...]  # judged one by one (degraded hardware)
    notes: tuple[str, ...] = ()  # what could not be read there, and why
    # NCCL's own diagnostics report (NCCL >= 2.31), read where NCCL printed it: the world's rank 0
    nccl_diag: tuple[DiagFinding, ...] = ()


def judge_config(hosts: Sequence[HostFacts], expected: ExpectedConfig | None = None,
                 rank_hosts: Sequence[str] = ()) -> list[Suspect]:
    """Every fact that differs from the golden configuration or, where it says nothing, from the fleet's
    majority, then every degraded GPU, then what NCCL's own diagnostics asked to review; none for an
    identical, healthy fleet that matches the golden one. rank_hosts: each world rank's host, in rank order
    (NCCL's report names ranks)."""
    golden = dict(expected.facts) if expected else {}
    return (_against_golden(hosts, golden, expected.source if expected else "") + _differences(hosts, set(golden))
            + [s for h in hosts for s in degraded(h)] + nccl_diag_suspects(hosts, rank_hosts))


def nccl_diag_suspects(hosts: Sequence[HostFacts], rank_hosts: Sequence[str]) -> list[Suspect]:
    """One `config` suspect per result line of NCCL's report that is not [OK], naming the hosts of the
    ranks the line names, or every host when it names none (a summary of the communicator: the world).
    NCCL calls its findings informational, so they keep hosts off the exclude list."""
    everyone = tuple(dict.fromkeys(rank_hosts)) or tuple(h.host for h in hosts)
    suspects = []
    for finding in (f for h in hosts for f in h.nccl_diag if f.needs_review):
        named = tuple(dict.fromkeys(rank_hosts[r] for r in finding.ranks if r < len(rank_hosts)))
        what = f"{finding.check}: {finding.message}" if finding.check else finding.message
        suspects.append(Suspect(CONFIG, named or everyone, None, None, None,
                                f"NCCL DIAG [{shown(finding.status)}] {shown(what)}"))
    return suspects


def fleet_wide_notes(hosts: Sequence[HostFacts], suspects: Sequence[Suspect]) -> list[str]:
    """A note when degraded hardware is found on more than half the hosts (at least two): a reading the
    whole fleet shares may be how its platform reports, not a fleet of broken hosts, and the exclude list
    then holds most of the cluster."""
    broken = {h for s in suspects if s.degraded for h in s.hosts}
    if len(broken) < 2 or len(broken) * 2 <= len(hosts):
        return []
    return [f"degraded hardware on {len(broken)} of {len(hosts)} hosts, all on the exclude list: check one by hand "
            "before excluding most of the fleet (a platform may report a link or a counter so on every host)"]


def unreported(hosts: Sequence[HostFacts], expected: ExpectedConfig | None) -> list[str]:
    """A note for each golden fact no host reported and no host could lack (a misspelt name, most likely)."""
    names = set(_names(hosts))
    return [f"{option_name('expect_config')} {expected.source}: no host reports a fact named {name!r}"
            for name, _ in (expected.facts if expected else ())
            if name not in names and not name.startswith(tuple(OPTIONAL_PREFIXES))]


def shown(value: str) -> str:
    """A host's value as one line of a suspect: a line break or other unprintable character in it (an
    environment variable may hold any) is written as an escape, so it can neither end the line nor forge
    the next one."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in value)


def _against_golden(hosts: Sequence[HostFacts], golden: dict[str, str], source: str) -> list[Suspect]:
    """Each host whose value of a golden fact is another (or none); a fact no host reports is left to
    `unreported`, unless a host may lack it (a variable)."""
    reported = set(_names(hosts))
    return [Suspect(CONFIG, (h.host,), None, None, None,
                    f"{shown(name)} {shown(value or 'not read')}, expected {shown(want)} ({shown(source)})")
            for name, want in golden.items() if name in reported or name.startswith(tuple(OPTIONAL_PREFIXES))
            for h in hosts if (value := _value(h, name)) != want]


def _names(hosts: Sequence[HostFacts]) -> list[str]:
    """Every fact name any host has, in the order of first appearance."""
    return list(dict.fromkeys(name for h in hosts for name in h.facts))


def _value(host: HostFacts, name: str) -> str | None:
    fact = host.facts.get(name)
    if fact is not None:
        return fact.value
    return next((absent for prefix, absent in OPTIONAL_PREFIXES.items() if name.startswith(prefix)), None)


def _values(hosts: Sequence[HostFacts], name: str) -> dict[str, str]:
    """host -> its value of the fact, for every host that has one (or may lack it: OPTIONAL_PREFIXES)."""
    return {h.host: v for h in hosts if (v := _value(h, name)) is not None}


def _majority(values: dict[str, str]) -> tuple[str, int] | None:
    """The value more than half the hosts share, and how many do; None when none does."""
    common, count = Counter(values.values()).most_common(1)[0]
    return (common, count) if count * 2 > len(values) else None


def fleet_values(hosts: Sequence[HostFacts]) -> dict[str, str]:
    """Each fact's majority value: what a healthy run saw, in the form the golden configuration takes
    (doctor.json's `config.fleet`, fed back as a golden file)."""
    found = {}
    for name in _names(hosts):
        if (majority := _majority(_values(hosts, name))) is not None:
            found[name] = majority[0]
    return found


def _differences(hosts: Sequence[HostFacts], judged: set[str]) -> list[Suspect]:
    """Facts not already judged against a golden value, each against the fleet's majority."""
    suspects = []
    for name in _names(hosts):
        if name in judged:
            continue
        values = _values(hosts, name)
        counts = Counter(values.values())
        if len(counts) < 2:
            continue
        majority = _majority(values)
        if majority is None:
            split = "; ".join(f"{shown(v)} on {hostlist.compress([h for h in values if values[h] == v])}"
                              for v, _ in counts.most_common())
            suspects.append(Suspect(CONFIG, tuple(values), None, None, None,
                                    f"{shown(name)} differs with no majority: {split}"))
            continue
        common, count = majority
        suspects.extend(Suspect(CONFIG, (host,), None, None, None,
                                f"{shown(name)} {shown(value)}, {count} others {shown(common)}")
                        for host, value in values.items() if value != common)
    return suspects


def degraded(host: HostFacts) -> list[Suspect]:
    """The host's GPUs that are unhealthy whatever the fleet says, one suspect per GPU and finding."""
    return [Suspect(CONFIG, (host.host,), None, None, None, f"GPU {gpu.index}: {finding}", degraded=True)
            for gpu in host.gpus for finding in gpu_findings(gpu)]


def gpu_findings(gpu: GpuHealth) -> list[str]:
    """What is wrong with one GPU, in words; an idle GPU's lower PCIe generation is power saving, not a fault."""
    found = []
    if gpu.ecc_uncorrectable:
        found.append(f"{gpu.ecc_uncorrectable} volatile uncorrectable ECC error(s)")
    if gpu.nvlinks_down:
        found.append(f"NVLink {gpu.nvlinks_down} of {gpu.nvlinks_down + (gpu.nvlinks_up or 0)} links down")
    narrow = _below(gpu.pcie_width_current, gpu.pcie_width_max)
    slow = _below(gpu.pcie_gen_current, gpu.pcie_gen_max) and not gpu.idle
    if narrow or slow:
        found.append(f"PCIe Gen{gpu.pcie_gen_current} x{gpu.pcie_width_current}, its maximum "
                     f"Gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}")
    if slowed := hw_slowdowns(gpu):
        found.append(f"clocks slowed by {', '.join(slowed)}")
    return found


def _below(current: int | None, most: int | None) -> bool:
    return current is not None and most is not None and current < most


def summary_line(hosts: Sequence[HostFacts], suspects: Sequence[Suspect]) -> str:
    """One line saying what the phase compared: facts, hosts, GPUs, sources, and what it found."""
    sources = sorted({f.source for h in hosts for f in h.facts.values()}
                     | {s for h in hosts for g in h.gpus for s in g.sources})
    gpus = sum(len(h.gpus) for h in hosts)
    found = f"{len(suspects)} config suspect(s)" if suspects else "the fleet agrees"
    return (f"# config: {len(_names(hosts))} fact(s) compared on {len(hosts)} host(s), {gpus} GPU(s) checked "
            f"(from {', '.join(sources) or 'nothing'}): {found}")


def facts_json(hosts: Sequence[HostFacts]) -> list[dict[str, Any]]:
    """doctor.json's `config.hosts`: each host's facts with their sources, its GPUs and notes."""
    return [{"host": h.host, "facts": {name: {"value": f.value, "source": f.source} for name, f in h.facts.items()},
             "gpus": [_gpu_json(g) for g in h.gpus], "notes": list(h.notes)} for h in hosts]


def _gpu_json(gpu: GpuHealth) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(gpu).items()}
