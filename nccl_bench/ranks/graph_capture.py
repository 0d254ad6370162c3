"""What --cuda-graph can capture here, and the options only a GPU uses: the sweep's plan and the replay's
ask the same questions before any process group, and are answered here. Plain code without torch.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from nccl_bench.errors import OptionError
from nccl_bench.ranks import devices
from nccl_bench.units.op_table import OPS

# torch captures point-to-point NCCL ops in a CUDA graph only from 2.7 on (pytorch #148462; on 2.4
# the capture fails, pytorch #133984).
GRAPH_P2P_SINCE = (2, 7)


def refuse_gpu_only(given: Mapping[str, object], backend: str) -> None:
    """Options (by key, with their values) that change how CUDA work is timed: on CPU they would only be
    recorded, so one given there is refused."""
    if devices.device_kind(backend) == "cuda":
        return
    for key, value in given.items():
        if value:
            raise OptionError(key, f"only applies on GPUs (NCCL); this run uses {backend} on CPU")


def uncapturable(op: str, torch_version: str | None, graph: str) -> str | None:
    """Why a CUDA graph cannot capture `op` on this torch, naming the option `graph`; None where it can."""
    if OPS[op].factor is None:  # barrier: ProcessGroupNCCL's ends in a CPU-side stream sync
        return f"{graph} captures only ops with a bandwidth factor (a barrier synchronizes the CPU)"
    if op == "sendrecv" and torch_version and devices.version_tuple(torch_version) < GRAPH_P2P_SINCE:
        return f"{graph} cannot capture point-to-point ops on torch {torch_version} (needs >= 2.7)"
    return None


def graph_exclusions(cuda_graph: int, ops: Iterable[str], on_gpu: bool, torch_version: str | None, graph: str,
                     where: str, mentions: tuple[str, ...] = ()) -> dict[str, str]:
    """Ops that --cuda-graph (named `graph`) cannot capture here, and why; a run where that is every op is
    refused, saying `where` the ops came from (an OptionError text: {key} for each of `mentions`)."""
    if not (cuda_graph and on_gpu):
        return {}
    wanted = list(dict.fromkeys(ops))
    excluded = {op: why for op in wanted if (why := uncapturable(op, torch_version, graph)) is not None}
    if excluded and len(excluded) == len(wanted):
        raise OptionError("cuda_graph", f"nothing left to capture in {where}: "
                          + "; ".join(f"{op}: {why}" for op, why in excluded.items()), mentions=mentions)
    return excluded
