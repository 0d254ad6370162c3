"""The minimal hand-written loop that fidelity_e2e.py holds `nccl_bench sweep` against.

    torchrun --standalone --nproc_per_node 2 benchmarks/reference_loop.py --sizes 1M,16M,64M --out ref.json

Plain torch.distributed and nothing of nccl_bench: per size, one zero-filled float32 tensor,
5 warmup all_reduces, N picked from a pilot (the fastest of 3 doubling blocks of >= 20 ms) so
the timed loop lasts >= --min-sample-ms, then barrier, perf_counter, N all_reduces, stop; the
time per op is the slowest rank's elapsed / N. Rank 0 writes {size_bytes: busbw GB/s, ...}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

WARMUP = 5  # same count as the sweep's default warmup
PILOT_BLOCK_S = 0.02
PILOT_REPEATS = 3


def parse_size(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,16M,64M")
    parser.add_argument("--min-sample-ms", type=float, default=200.0, help="the sweep's CPU default")
    parser.add_argument("--fill", choices=("zeros", "pattern"), default="zeros",
                        help="buffer contents: zeros, or small positive integers (as nccl_bench's check writes)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def slowest(seconds: float) -> float:
        value = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return value.item()

    def timed(tensor, n: int) -> float:
        dist.barrier()
        start = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(tensor)
        return slowest(time.perf_counter() - start) / n

    results = {}
    for size in (parse_size(s) for s in args.sizes.split(",")):
        tensor = torch.zeros(size // 4, dtype=torch.float32)
        if args.fill == "pattern":
            tensor.copy_(1 + (torch.arange(tensor.numel()) + 3 * rank) % 7)
        for _ in range(WARMUP):
            dist.all_reduce(tensor)
        pilot_s = math.inf
        for _ in range(PILOT_REPEATS):
            block = 1
            while (per_op := timed(tensor, block)) * block < PILOT_BLOCK_S:
                block *= 2
            pilot_s = min(pilot_s, per_op)
        n = max(3, math.ceil(args.min_sample_ms / 1e3 / pilot_s))
        per_op_s = timed(tensor, n)
        results[size] = {"iters": n, "time_us": per_op_s * 1e6,
                         "busbw_gbps": size / per_op_s / 1e9 * 2 * (world - 1) / world}
    if rank == 0:
        args.out.write_text(json.dumps({"pid": os.getpid(), "points": results}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
