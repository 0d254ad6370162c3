"""A real 2-rank training job traced as a user would trace theirs: a small torch.nn model trained with
DistributedDataParallel over gloo on CPU tensors, under torch.profiler, one Kineto trace per rank.

`python -m tests.helpers.replay_job FOLDER` writes FOLDER/rank0.json and FOLDER/rank1.json; tests call
`trace_ddp_job(folder)`, which runs it in a fresh interpreter (a process group in the test's own
process would outlive the test).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WORLD_SIZE = 2
TRAINING_STEPS = 6
BATCH = 16
LAYERS = ((32, 64), (64, 8))  # (inputs, outputs) of each Linear layer
# Every gradient fits one DDP bucket: one all_reduce per step of all parameters, in float32.
GRADIENT_ELEMENTS = sum(inputs * outputs + outputs for inputs, outputs in LAYERS)


def trace_ddp_job(folder: Path, timeout_s: float = 120) -> list[Path]:
    """Run the job in a fresh interpreter; the traces it wrote, rank 0 first."""
    from tests.helpers.launch import REPO, worker_env

    subprocess.run([sys.executable, "-m", "tests.helpers.replay_job", str(folder)], cwd=REPO, env=worker_env(),
                   check=True, timeout=timeout_s, capture_output=True)
    return [folder / f"rank{rank}.json" for rank in range(WORLD_SIZE)]


def _train(rank: int, folder: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=WORLD_SIZE)
    try:
        torch.manual_seed(rank)
        (first, hidden), (_, last) = LAYERS
        model = DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Linear(first, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, last)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        # record_shapes: gloo's annotations then carry their tensors' shapes, the collectives' sizes.
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=True) as profiler:
            for _ in range(TRAINING_STEPS):
                optimizer.zero_grad()
                loss = model(torch.randn(BATCH, LAYERS[0][0])).square().mean()
                loss.backward()
                optimizer.step()
        profiler.export_chrome_trace(f"{folder}/rank{rank}.json")
    finally:
        dist.destroy_process_group()


def main(folder: str) -> None:
    import torch.multiprocessing

    # Forked, not spawned: the workers share the imported torch instead of importing it again.
    torch.multiprocessing.start_processes(_train, args=(folder,), nprocs=WORLD_SIZE, start_method="fork")


if __name__ == "__main__":
    main(sys.argv[1])
