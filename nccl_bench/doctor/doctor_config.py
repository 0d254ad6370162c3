"""The doctor's options and configuration: the frozen DoctorConfig, whose fields carry their options'
declarations (parsers shared with the sweep's where the meaning is the same), and the message size it uses.

This is the doctor's declaration module: the doctor's other modules name an option by its key, and this
one and cli/ write its flag. Plain code without torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import (
    PerDevice,
    declaration,
    expand_choices,
    number,
    option,
    path,
    percent,
    shown_size,
    size,
    small_text_file,
    switch,
    tolerance,
    toml_table,
    whole,
)
from nccl_bench.option_types import option_name as _option_name
from nccl_bench.options import BACKEND, OUT, PROM, RESULTS_ROOT, TIMEOUT
from nccl_bench.units import hostlist

PHASES = ("nodes", "pairs")  # in the order they run
ELEMENT_BYTES = 4  # the doctor's buffers are float32
# One large-ish message per measurement. GPU: where NVLink and IB reach their plateau in
# nccl-tests. CPU/gloo: big enough that a pair exchange is bandwidth-bound (not latency-bound)
# on a veth link, small enough that a shaped link of a few hundred Mbit/s still takes < 0.2 s.
SIZE_BYTES = PerDevice(gpu=256 * 1024**2, cpu=4 * 1024**2)


def _phases(values: Any, option: str) -> tuple[str, ...]:
    """Phases may repeat or hold commas; 'all' (or none given) means every phase; PHASES order."""
    chosen = expand_choices(values or ["all"], PHASES, option, "phase", normalize=str.lower)
    return tuple(p for p in PHASES if p in chosen)


def _hostlist(value: Any, option: str) -> tuple[str, ...]:
    return tuple(hostlist.expand(str(value), option))


MAX_GOLDEN_BYTES = 1 << 20  # a golden config is a few dozen facts; anything larger is not one


class ExpectedConfig(NamedTuple):
    """A golden configuration: fact name -> the value every host should report, and the file it came from."""

    source: str
    facts: tuple[tuple[str, str], ...]


def _golden(value: Any, option: str) -> ExpectedConfig:
    """A JSON or (by its .toml suffix) TOML table of fact -> value; a sub-table's keys are prefixed with its
    name (`[env] NCCL_SOCKET_IFNAME = "eth0"` is the fact `env NCCL_SOCKET_IFNAME`). Read once, here."""
    file = Path(value)
    toml = file.suffix.lower() == ".toml"
    text = small_text_file(file, MAX_GOLDEN_BYTES, option, "TOML" if toml else "JSON")
    data = toml_table(text, file, option) if toml else _json_table(text, file, option)
    facts: list[tuple[str, str]] = []
    for name, item in data.items():
        inner = item.items() if isinstance(item, dict) else [(None, item)]
        for key, fact in inner:
            if isinstance(fact, bool) or not isinstance(fact, (str, int, float)):
                where = name if key is None else f"{name} {key}"
                raise UserInputError(option, f"{file}: {where!r} must be a string or a number, got {fact!r}")
            facts.append((name if key is None else f"{name} {key}", str(fact)))
    if not facts:
        raise UserInputError(option, f"{file} names no fact")
    return ExpectedConfig(str(file), tuple(facts))


def _json_table(text: str, file: Path, option: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserInputError(option, f"{file} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserInputError(option, f"{file} must hold a JSON object of fact -> value")
    return data


@dataclass(frozen=True)
class DoctorConfig:
    phases: tuple[str, ...] = option(
        ("--phase",), _phases, "nodes (intra-node all_reduce per host), pairs (every node pair, rail by rail) or "
        "{default} (default); repeat or comma-separate.", default=PHASES,
        show=lambda phases: "all" if phases == PHASES else ",".join(phases), many=True)
    config_only: bool = option(  # seconds: no buffers, no pair rounds
        ("--config-only",), switch, "Only compare every host's configuration (versions, GPUs, ECC, NVLink, PCIe, "
        "RDMA ports, NCCL_*/CUDA_* variables) against the fleet; measure nothing.", default=False,
        given_default=True)
    expect_config: ExpectedConfig | None = option(
        ("--expect-config",), _golden, "A golden configuration (JSON, or TOML by its .toml suffix) of fact -> "
        "value, e.g. {\"driver\": \"580.159.04\", \"env NCCL_SOCKET_IFNAME\": \"eth0\"}: a host that reports "
        "another value is a config suspect; facts it does not name are judged against the fleet's majority.",
        metavar="FILE")
    quick: bool = option(
        ("--quick",), switch, "A few random pairings, then suspects re-tested against nodes that passed, instead of "
        "all pairs.", default=False, given_default=True)
    quick_rounds: int = option(  # each node meets up to this many partners
        ("--quick-rounds",), whole(1), "Random pairings in --quick (default {default}).", default=3)
    seed: int = option(("--seed",), whole(None),
                       "Seed of --quick's pairings (default {default}): the same seed, the same pairs.", default=0)
    size_bytes: int | None = option(  # None: the option's default for the device
        ("--size",), size(ELEMENT_BYTES, "one float32"),
        "Message size per measurement, e.g. 4M, 256M (default: {default}).", default=SIZE_BYTES, show=shown_size)
    iters: int = option(("--iters",), whole(1), "Exchanges (or all_reduces) per sample (default {default}).",
                        default=4)
    samples: int = option(  # verdicts judge the fastest sample, so a disturbed one costs nothing
        ("--samples",), whole(1), "Samples per measurement: verdicts judge the fastest, doctor.csv also has the "
        "median (default {default}).", default=3)
    warmup: int = option(  # untimed exchanges first: connection set-up and first-touch pages
        ("-w", "--warmup"), whole(0), "Untimed exchanges before each measurement (default {default}).", default=1)
    tolerance: float = option(  # healthy simulated hosts stayed within 15% of their run's median (docs/doctor.md)
        ("--tolerance",), tolerance, "Suspect when below the fleet median by more than this (and 3 MAD-sigmas): "
        "{default} (default) or 0.2.", default=0.20, show=percent, given_default=True)
    expect_gbps: float | None = option(
        ("--expect",), number(), "Also suspect any pair below this busbw in GB/s (what the fabric should give).",
        metavar="GBPS")
    expect_hosts: tuple[str, ...] | None = option(  # None: SLURM_JOB_NODELIST under srun, else nobody expected
        ("--expect-hosts",), _hostlist, "Hosts that should take part, as a Slurm hostlist (node[01-08],gpu3); one "
        "that does not join is a 'missing' suspect (default under srun: SLURM_JOB_NODELIST).", metavar="LIST")
    exclude_file: Path | None = option(
        ("--exclude-file",), path, "Write the hosts to keep out (node, rail and missing suspects, degraded hardware) "
        "to PATH, one per line; empty when none.", metavar="PATH")
    backend: str = option(BACKEND)
    out: Path | None = option(OUT, folder="doctor")
    results_root: Path = option(RESULTS_ROOT)
    timeout_s: float = option(TIMEOUT, step="exchange")
    prom: Path | None = option(PROM)


def option_name(key: str) -> str:
    """The doctor option that sets a DoctorConfig field, for messages."""
    return _option_name(DoctorConfig, key)


def option_usage(key: str) -> str:
    """The option with its value's name, as a message suggests it: `--expect GBPS`."""
    option = declaration(DoctorConfig, key)
    return f"{option.name} {option.metavar}"


def resolve_size(config: DoctorConfig, on_gpu: bool) -> int:
    """The message size, rounded down to whole float32 elements."""
    size = config.size_bytes or (SIZE_BYTES.gpu if on_gpu else SIZE_BYTES.cpu)
    return size - size % ELEMENT_BYTES
