"""What one host contributes to the doctor's configuration phase, read on its first rank: versions,
GPUs (hardware/host_config.py), RDMA ports and the variables that steer NCCL, CUDA and torch's NCCL
process group. Runs on ranks; torch is imported only where versions are read, and not at all by a run
without torch (ranks/session.RunRequest.without_torch), which reads the same values from torch's files.

Values are strings as an operator would compare them; each fact names its source. Environment values
are recorded as meta.json records them (ranks/run_facts.recorded_env: nccl_bench's own variables
never), with passwords hidden (units/passwords) and a variable whose name says it holds a secret
shown as ***.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from nccl_bench.doctor.config_check import Fact, HostFacts
from nccl_bench.hardware.host_config import HostHardware, read_host_hardware
from nccl_bench.ranks.run_facts import OWN_ENV_PREFIX, RECORDED_ENV_PREFIXES, stack_versions
from nccl_bench.results.nccl_diag import parse_report
from nccl_bench.units.passwords import HIDDEN, hide_written

# The variables compared across hosts: NCCL's, torch's NCCL process group's, and CUDA's.
CONFIG_ENV_PREFIXES = (*RECORDED_ENV_PREFIXES, "CUDA_")
# A variable named like this holds a credential, whatever its prefix: its value is never shown.
SECRET_NAME_PARTS = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL")
SOURCE_ENV = "environment"
# A test and diagnostic hook: the sysfs tree the RDMA ports are read from, instead of /sys (simulated hosts
# each get their own, as each gets its own nvidia-smi). nccl_bench's own variables are never compared.
SYSFS_ROOT_ENV = f"{OWN_ENV_PREFIX}SYSFS_ROOT"


def environment_facts(environ: Mapping[str, str]) -> dict[str, Fact]:
    """`env NAME` -> its value, masked where secret, for every variable of CONFIG_ENV_PREFIXES."""
    found = {}
    for name, value in sorted(environ.items()):
        if not name.startswith(CONFIG_ENV_PREFIXES) or name.startswith(OWN_ENV_PREFIX):
            continue
        shown = HIDDEN if any(part in name.upper() for part in SECRET_NAME_PARTS) else hide_written(value)
        found[f"env {name}"] = Fact(shown, SOURCE_ENV)
    return found


def hardware_facts(hardware: HostHardware) -> dict[str, Fact]:
    """The host-wide facts of its GPUs and RDMA ports; per-GPU health stays with the GPUs."""
    facts: dict[str, Fact] = {"nvidia-smi": Fact(hardware.smi, "nvidia-smi -q")}
    if hardware.driver:
        facts["driver"] = Fact(*hardware.driver)
    if hardware.cuda_driver:
        facts["cuda driver"] = Fact(*hardware.cuda_driver)
    gpus = hardware.gpus
    where = "+".join(dict.fromkeys(s for g in gpus for s in g.sources)) or "no answer (nvidia-smi, NVML, /proc)"
    facts["gpu count"] = Fact(str(len(gpus)), where)
    for name, values in (("gpu model", [g.name for g in gpus]),
                         ("gpu memory", [f"{g.memory_mib} MiB" if g.memory_mib else None for g in gpus]),
                         ("ecc mode", [g.ecc_mode for g in gpus])):
        if any(values):
            facts[name] = Fact(", ".join(dict.fromkeys(v or "unknown" for v in values)), where)
    reasons = sorted({r for g in gpus for r in g.clock_reasons})
    if gpus:
        facts["clock event reasons"] = Fact(", ".join(reasons) or "none", where)
    for port in hardware.rdma:
        facts[f"rdma {port.name}"] = Fact(port.state + (f" {port.rate}" if port.rate else ""), "/sys/class/infiniband")
    return facts


def version_facts(on_gpu: bool, without_torch: bool = False) -> dict[str, Fact]:
    """torch's version, and on GPUs the CUDA it was built with and the NCCL it loaded (run_facts.stack_versions,
    as the header has them); without_torch: read from torch's files (hardware/stack.py), each with its source."""
    found = stack_versions(on_gpu, without_torch)
    names = {"torch": "torch", "cuda runtime": "cuda", "nccl": "nccl"}
    return {name: Fact(*found[key]) for name, key in names.items() if key in found}


def host_facts(host: str, environ: Mapping[str, str], on_gpu: bool, nccl_diag_lines: Sequence[str] = (),
               without_torch: bool = False) -> HostFacts:
    """This host's contribution, read now (nvidia-smi, NVML, /proc, /sys or SYSFS_ROOT_ENV's tree, the
    environment, torch or, without_torch, its files), with the result lines of NCCL's diagnostics report
    where this rank holds one."""
    hardware = read_host_hardware(sysfs_root=environ.get(SYSFS_ROOT_ENV) or "/sys")
    facts = {**version_facts(on_gpu, without_torch), **hardware_facts(hardware), **environment_facts(environ)}
    return HostFacts(host, facts, hardware.gpus, hardware.notes, tuple(parse_report(list(nccl_diag_lines))))
