"""The doctor in the scheduler's terms: hosts expected but absent, and the hosts to keep out. Pure.

Expected hosts come from --expect-hosts, else, under srun, from SLURM_JOB_NODELIST (the job's
allocation: a step may run on part of it). A host expected that never joined is a `missing`
suspect. The exclude list is every host a `node`, `rail` or `missing` suspect names, and every host with
degraded hardware (a `config` suspect marked degraded), as one compressed Slurm hostlist for `sbatch
--exclude`: a `link` names two hosts that are fine elsewhere, and a host whose configuration merely
differs from the fleet's may differ on purpose.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from nccl_bench.doctor.doctor_config import option_name
from nccl_bench.doctor.verdicts import Suspect
from nccl_bench.units import hostlist

MISSING = "missing"
EXCLUDED_KINDS = ("node", "rail", MISSING)
SLURM_NODELIST = "SLURM_JOB_NODELIST"


def expected_hosts(given: Sequence[str] | None, launcher: str,
                   environ: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """(hosts expected to join, where that list came from); no hosts when nothing says."""
    if given:
        return tuple(given), option_name("expect_hosts")
    if launcher == "slurm" and environ.get(SLURM_NODELIST):
        return tuple(hostlist.expand(environ[SLURM_NODELIST], SLURM_NODELIST)), SLURM_NODELIST
    return (), ""


def _short(host: str) -> str:
    return host.split(".", 1)[0]


def missing_hosts(expected: Sequence[str], present: Sequence[str]) -> list[str]:
    """Expected hosts absent from the run, in the expected order; `node01` and `node01.cluster` are one host."""
    here = set(present) | {_short(h) for h in present}
    return [h for h in expected if h not in here and _short(h) not in here]


def missing_suspects(expected: Sequence[str], present: Sequence[str], source: str) -> list[Suspect]:
    listed = hostlist.compress(expected)
    return [
        Suspect(MISSING, (host,), None, None, None, f"expected ({source} {listed}) but never joined the run")
        for host in missing_hosts(expected, present)
    ]


def excluded_hosts(suspects: Sequence[Suspect]) -> list[str]:
    """Every host a node, rail, missing or degraded-hardware suspect names, each once, in the suspects' order."""
    return list(dict.fromkeys(h for s in suspects if s.kind in EXCLUDED_KINDS or s.degraded for h in s.hosts))


def exclude_file_text(suspects: Sequence[Suspect]) -> str:
    """One host per line (Slurm's --exclude=<file> and most schedulers read this); empty when none."""
    return "".join(f"{host}\n" for host in excluded_hosts(suspects))
