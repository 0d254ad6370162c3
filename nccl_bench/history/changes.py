"""What changed between a run and the runs it was judged against, read from their meta.json: the
versions (nccl-bench, torch, NCCL, CUDA, driver, python), the NCCL_*/TORCH_NCCL_* variables, the GPU
model and count, the hosts, world size, nodes, backend, launcher, --nccl-env variant and the sweep's
settings. Pure: metas in, differences out. What users chase after "it got slower" is this list.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from nccl_bench.units import hostlist

UNSET = "unset"
# Settings that say where results went or which points were measured, not how a point was measured:
# another op or size in the same sweep changes no series' numbers.
_NOT_HOW = frozenset({"out", "results_root", "prom", "json", "markdown", "junit", "ops", "sizes", "min_bytes",
                      "max_bytes", "step_bytes", "step_factor", "timeout_s", "history", "no_history", "nccl_env"})
_RUN_FACTS = (("world size", "world_size"), ("nodes", "nodes"), ("backend", "backend"), ("launcher", "launcher"))


@dataclass(frozen=True)
class Change:
    what: str  # "nccl version", "NCCL_ALGO", "hosts", "config.iters", ...
    before: str  # the value(s) of the runs judged against ("unset": none had it)
    after: str  # the run's own

    def as_json(self) -> dict[str, str]:
        return {"what": self.what, "before": self.before, "after": self.after}

    def __str__(self) -> str:
        return f"{self.what} {self.before} -> {self.after}"


def facts(meta: dict[str, Any]) -> dict[str, str]:
    """The run's facts by name, each as one text; a fact the meta.json lacks is absent."""
    found: dict[str, str] = {}
    for name, version in sorted((meta.get("versions") or {}).items()):
        found[f"{name} version"] = str(version)
    for name, value in sorted((meta.get("env") or {}).items()):
        found[str(name)] = str(value)
    devices = [str(d) for d in meta.get("devices") or []]
    if devices:
        found["devices"] = ", ".join(f"{model} x{count}" for model, count in sorted(Counter(devices).items()))
    hosts = sorted({str(h) for h in meta.get("hostnames") or []})
    if hosts:
        found["hosts"] = hostlist.compress(hosts)
    for name, key in _RUN_FACTS:
        if meta.get(key) is not None:
            found[name] = str(meta[key])
    variant = meta.get("variant")
    if variant is not None:
        found["variant"] = str(variant) or "none"
    for name, value in sorted((meta.get("config") or {}).items()):
        if name not in _NOT_HOW and value is not None:
            found[f"config.{name}"] = str(value)
    return found


def differences(after: dict[str, Any], before: Sequence[dict[str, Any]]) -> list[Change]:
    """Each fact of `after` that none of the `before` runs had: before lists their values, most common first."""
    mine = facts(after)
    theirs = [facts(meta) for meta in before]
    if not theirs:
        return []
    changes = []
    for name in sorted(set(mine).union(*theirs), key=_order):
        now = mine.get(name, UNSET)
        earlier = Counter(facts_.get(name, UNSET) for facts_ in theirs)
        if now not in earlier:
            changes.append(Change(name, ", ".join(value for value, _ in earlier.most_common()), now))
    return changes


def merged(*lists: Iterable[Change]) -> tuple[Change, ...]:
    """Changes of several runs (a step's first and its latest), each fact once, the first seen kept."""
    seen: dict[str, Change] = {}
    for changes in lists:
        for change in changes:
            seen.setdefault(change.what, change)
    return tuple(seen.values())


def _order(name: str) -> tuple[int, str]:
    """Versions first, then the variables, the hardware and the run's shape, the settings last."""
    if name.endswith(" version"):
        return 0, name
    if name.startswith(("NCCL_", "TORCH_")):
        return 1, name
    if name.startswith("config."):
        return 3, name
    return 2, name
