"""The replay's options and configuration: the frozen ReplayConfig, whose fields carry their options'
declarations (the sweep's timing options, shared, and the run's folder, backend and deadline).

This is the replay's declaration module: the replay's other modules name an option by its key, and this
one and cli/ write its flag. Plain code without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_bench.option_types import Argument, argument, declaration, option
from nccl_bench.option_types import option_name as _option_name
from nccl_bench.options import BACKEND, OUT, RESULTS_ROOT, TIMEOUT
from nccl_bench.sweep.sweep_config import MIN_SAMPLE_MS, SweepConfig

TRACES = Argument(None, "TRACE...",
                  "A job's PyTorch profiler trace (Kineto JSON, or its gzip): one file, or one per rank of one job.",
                  many=True, parse=lambda values, name: tuple(Path(value) for value in values))

# What the replay's "alone here" time is. Call by call, each through torch's launch path (on NCCL its
# 15-50 us per call count, which the trace's kernel durations do not hold); with --cuda-graph N, N calls
# captured in a CUDA graph and its replays timed with CUDA events: kernel to kernel, as the trace's.
ALONE_LAUNCH_PATH = "launch_path"
ALONE_CUDA_GRAPH = "cuda_graph"


@dataclass(frozen=True)
class ReplayConfig:
    traces: tuple[Path, ...] = argument(TRACES)
    warmup: int = option(declaration(SweepConfig, "warmup"))
    iters: int | None = option(declaration(SweepConfig, "iters"))  # None = auto: calibrated to last min_sample_ms
    min_sample_ms: float | None = option(declaration(SweepConfig, "min_sample_ms"))  # None: the device's default
    trials: int = option(declaration(SweepConfig, "trials"))
    cuda_graph: int = option(declaration(SweepConfig, "cuda_graph"))  # 0: each call through torch's launch path
    backend: str = option(BACKEND)
    out: Path | None = option(OUT, folder="replay")
    results_root: Path = option(RESULTS_ROOT)
    timeout_s: float = option(TIMEOUT, step="collective")

    def sample_ms(self, on_gpu: bool) -> float:
        if self.min_sample_ms is not None:
            return self.min_sample_ms
        return MIN_SAMPLE_MS.gpu if on_gpu else MIN_SAMPLE_MS.cpu

    @property
    def alone_here(self) -> str:
        """How the replay times each collective alone (ALONE_HERE): in CUDA graphs, or call by call."""
        return ALONE_CUDA_GRAPH if self.cuda_graph else ALONE_LAUNCH_PATH

    def as_meta(self) -> dict[str, Any]:
        """JSON-friendly view for meta.json."""
        return {"traces": [str(path) for path in self.traces], "warmup": self.warmup, "iters": self.iters,
                "min_sample_ms": self.min_sample_ms, "trials": self.trials, "cuda_graph": self.cuda_graph,
                "alone_here": self.alone_here, "backend": self.backend,
                "out": None if self.out is None else str(self.out), "results_root": str(self.results_root),
                "timeout_s": self.timeout_s}


def option_name(key: str) -> str:
    """The replay option (or argument) that sets a ReplayConfig field, for messages."""
    return _option_name(ReplayConfig, key)
