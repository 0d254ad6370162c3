"""Kineto traces written as torch writes them, small: `record_param_comms` collectives (torch 2.1 on),
NCCL kernels linked to them by External id, and a distributedInfo header. Tests build hostile or
particular traces from these pieces; real traces are the fixtures (tests/fixtures/traces)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def collective(name: str = "allreduce", nelems: int = 1024, dtype: str = "Float", ranks: list[int] | None = None,
               ts: float = 0.0, dur: float = 10.0, external_id: int = 1, **args: Any) -> dict[str, Any]:
    """A record_param_comms event of one collective; `args` changes or adds its arguments."""
    ranks = [0, 1] if ranks is None else ranks
    arguments = {"External id": external_id, "Collective name": name, "In msg nelems": nelems,
                 "Out msg nelems": nelems, "dtype": dtype, "Group size": len(ranks),
                 "Process Group Ranks": json.dumps(ranks), "Process Group Name": "0", "In split size": "[]",
                 "Out split size": "[]", **args}
    return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": arguments}


def kernel(external_id: int = 1, ts: float = 1.0, dur: Any = 5.0,
           name: str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") -> dict[str, Any]:
    """An NCCL kernel launched by the collective of `external_id`."""
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"External id": external_id, "correlation": external_id + 10_000}}


def write_trace(path: Path, events: list[dict[str, Any]], rank: int | None = 0, world_size: Any = 2,
                backend: str = "gloo", **info: Any) -> Path:
    """`{"traceEvents": events, "distributedInfo": {...}}` at `path`; a None value leaves its key out."""
    header = {"backend": backend, "rank": rank, "world_size": world_size, **info}
    document = {"traceEvents": events, "distributedInfo": {k: v for k, v in header.items() if v is not None}}
    path.write_text(json.dumps(document, allow_nan=True))
    return path


def point_to_point(name: str, peer: int, nelems: int = 1024, ranks: list[int] | None = None, ts: float = 0.0,
                   external_id: int = 1) -> dict[str, Any]:
    """A send's or recv's record_param_comms as torch writes it inside batch_isend_irecv: its peer's global
    rank as `Dst Rank` (send) or `Src Rank` (recv); it closes before the block's kernel is launched."""
    peer_key = "Dst Rank" if name == "send" else "Src Rank"
    return collective(name, nelems=nelems, ranks=[0, 1, 2, 3] if ranks is None else ranks, ts=ts, dur=3.0,
                      external_id=external_id, **{peer_key: peer})


def coalesced(external_id: int, ts: float, dur: float = 20.0) -> dict[str, Any]:
    """The nccl:coalesced annotation of the Work that ProcessGroupNCCL::endCoalescing makes: the block's one
    NCCL kernel is launched inside it."""
    return {"ph": "X", "cat": "user_annotation", "name": "nccl:coalesced", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"External id": external_id}}


def launch(correlation: int, ts: float) -> dict[str, Any]:
    """The CUDA runtime call that launched a kernel, linked to it by `correlation`."""
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2.0,
            "args": {"correlation": correlation}}


SENDRECV_KERNEL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
