"""The replay's configuration: the frozen ReplayConfig, every value checked by its declared option
(nccl_bench/options.py: the sweep's timing options, shared, and the run's folder, backend and deadline).
Plain code without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from nccl_bench.options import MIN_SAMPLE_MS, REPLAY_OPTION, REPLAY_OPTIONS, TRACES, read_values


def _default(key: str) -> Any:
    return REPLAY_OPTION[key].read_default()


@dataclass(frozen=True)
class ReplayConfig:
    traces: tuple[Path, ...]
    warmup: int = _default("warmup")
    iters: int | None = _default("iters")  # None = auto: calibrated per collective to last min_sample_ms
    min_sample_ms: float | None = None  # None: the option's default for the device
    trials: int = _default("trials")
    backend: str = _default("backend")
    out: Path | None = None
    results_root: Path = _default("results_root")
    timeout_s: float = _default("timeout_s")

    def sample_ms(self, on_gpu: bool) -> float:
        if self.min_sample_ms is not None:
            return self.min_sample_ms
        return MIN_SAMPLE_MS.gpu if on_gpu else MIN_SAMPLE_MS.cpu

    def as_meta(self) -> dict[str, Any]:
        """JSON-friendly view for meta.json."""
        return {"traces": [str(path) for path in self.traces], "warmup": self.warmup, "iters": self.iters,
                "min_sample_ms": self.min_sample_ms, "trials": self.trials, "backend": self.backend,
                "out": None if self.out is None else str(self.out), "results_root": str(self.results_root),
                "timeout_s": self.timeout_s}


def build_config(given: Mapping[str, Any]) -> ReplayConfig:
    """The command line's values -> ReplayConfig; values that are None take the defaults. The command's
    other options may be among `given`: the config reads the keys of its own."""
    own = {option.key for option in REPLAY_OPTIONS}
    values = read_values(REPLAY_OPTIONS, {k: v for k, v in given.items() if k in own and v is not None})
    return ReplayConfig(traces=tuple(Path(path) for path in given[TRACES.key]), **values)
