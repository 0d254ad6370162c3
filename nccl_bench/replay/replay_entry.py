"""The replay as the CLI calls it: `read_replay_job` reads the traces into the job's profile and makes the
job; the job refuses what the ranks would refuse (a group larger than the launch) before any starts,
runs on this rank, and reads a finished run back beside the profile.

Every call the command makes into replay/ is `read_replay_job` or a method of its ReplayJob (placed as
sweep/sweep_entry.py's and doctor/doctor_entry.py's), and the profile's JSON (replay/profile.py) it
writes. The body and torch load inside the methods that use them; the CLI imports this module when the
command runs, never for `--help`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from nccl_bench.errors import RunFailedError, UserInputError
from nccl_bench.replay.profile import Profile, profile_traces, with_envelope, with_replay
from nccl_bench.replay.replay_config import ReplayConfig
from nccl_bench.replay.replay_plan import (
    MEMORY_REMEDY,
    TRACE_SOURCE,
    ReplayPlan,
    points_for_launch,
    refuse_too_few_ranks,
    replayed_trace,
    uncaptured_ops,
)
from nccl_bench.replay.trace_events import is_stream
from nccl_bench.replay.trace_reader import RankTrace, read_trace
from nccl_bench.results.schema import ResultRow

if TYPE_CHECKING:
    from nccl_bench.replay.replay_body import ReplaySummary


@dataclass(frozen=True)
class ReplayJob:
    """A replay as asked for: the config, the traces read, the job's profile, a sweep to compare with."""

    config: ReplayConfig
    traces: tuple[RankTrace, ...]
    profile: Profile
    envelope: tuple[ResultRow, ...] | None  # --envelope's rows; None: not given

    @property
    def replayed(self) -> RankTrace:
        return replayed_trace(list(self.traces))

    def points(self, world_size: int) -> ReplayPlan:
        """The points on `world_size` ranks; a group larger than that is refused (exit 2)."""
        return points_for_launch(self.replayed, world_size)

    def uncaptured(self, plan: ReplayPlan, backend: str) -> dict[str, str]:
        """--cuda-graph checked against the plan on `backend` (replay_plan.uncaptured_ops): each op no graph
        captures here, with why."""
        import torch

        return uncaptured_ops(plan, self.config.cuda_graph, backend, torch.__version__)

    def preflight(self, workers: int) -> tuple[str, list[str]]:
        """Without a launcher, before `workers` local ranks start: a group they cannot hold, the backend,
        --cuda-graph, host memory; the backend they will use and what will not be replayed."""
        from nccl_bench.ranks.preflight import check_local_workers, chosen_backend

        for path in self.config.traces:  # each worker reads the traces again, where a pipe has nothing left
            if is_stream(path):
                raise UserInputError(str(path), "a pipe or FIFO is read once, and local workers read the traces "
                                                "again: save it to a file first")
        refuse_too_few_ranks(self.replayed, workers)
        plan = self.points(workers)
        backend = chosen_backend(self.config.backend)
        self.uncaptured(plan, backend)
        check_local_workers("replay", backend, workers, plan.bytes_per_rank, "traces", MEMORY_REMEDY)
        return backend, list(plan.left_out)

    def run(self, launch, on_stuck: Callable[[RunFailedError], None]) -> ReplaySummary:
        """Under a launcher, on every rank: the points planned for its ranks, replayed through the shared
        life cycle (replay/replay_body.py)."""
        from nccl_bench.ranks.preflight import chosen_backend
        from nccl_bench.replay.replay_body import execute

        plan = self.points(launch.world_size)
        uncaptured = self.uncaptured(plan, chosen_backend(self.config.backend))
        return execute(self.config, plan, uncaptured, on_stuck=on_stuck)

    def replayed_profile(self, run_dir: Path) -> Profile:
        """The profile with the replayed times of a finished run's rows."""
        from nccl_bench.results.loader import read_run
        from nccl_bench.results.run_folder import read_meta

        meta = read_meta(run_dir)
        return with_replay(self.profile, read_run(run_dir, "run").rows, meta["world_size"],
                           meta["config"].get("cuda_graph", 0))


def read_replay_job(config: ReplayConfig, envelope: Path | None = None, envelope_label: str = "") -> ReplayJob:
    """The checked config -> the job: every trace read (one line, exit 2, for one that is no trace or holds
    no collective) and profiled; the envelope's rows read (errors name it by `envelope_label`)."""
    traces = tuple(read_trace(path) for path in config.traces)
    rows = None
    if envelope is not None:
        from nccl_bench.results.loader import load_rows

        rows = tuple(load_rows(envelope, envelope_label))
        refuse_a_replayed_envelope(rows, envelope, envelope_label)
    profile = profile_traces(traces)
    return ReplayJob(config, traces, profile if rows is None else with_envelope(profile, rows), rows)


def refuse_a_replayed_envelope(rows: Sequence[ResultRow], envelope: Path, label: str) -> None:
    """The envelope is what the fabric reaches at each size, a sweep's rows: a replay's rows are one job's
    collectives at that job's sizes, and beside a replay they would be read as the fabric's best."""
    replayed = next((row.source for row in rows if row.source.startswith(TRACE_SOURCE)), None)
    if replayed is not None:
        raise UserInputError(label, f"{envelope} is a replay's run ({replayed}), not a sweep: give the run of "
                                    "a sweep of this fabric (nccl-bench sweep)")
