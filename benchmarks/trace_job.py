"""A one-rank NCCL (gloo without a GPU) training job traced with torch.profiler: a real modern Kineto
trace for replay's reader (benchmarks/gpu_nccl_path.sh runs it on a GPU; tests/fixtures/traces holds one).

Usage: python benchmarks/trace_job.py OUT.json
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

STEPS = 4
BUFFER_ELEMS = 1 << 20  # 4 MiB of float32: the all_reduce and all_gather beside DDP's own buckets


def main(out: str) -> None:
    cuda = torch.cuda.is_available()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    device = torch.device("cuda:0") if cuda else torch.device("cpu")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(512, 512).to(device),
                                                      device_ids=[0] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(STEPS):
            model(torch.randn(64, 512, device=device)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            ones = torch.ones(BUFFER_ELEMS, device=device)
            dist.all_reduce(ones)
            dist.all_gather_into_tensor(torch.empty(BUFFER_ELEMS, device=device), ones)
        if cuda:
            torch.cuda.synchronize()
    prof.export_chrome_trace(out)
    dist.destroy_process_group()
    print("trace written", out)


if __name__ == "__main__":
    main(sys.argv[1])
