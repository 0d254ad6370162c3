"""`nccl-bench replay`: traces -> the job's communication profile; without ranks that is the answer (and
--json). Under a launcher or --workers: the job's collectives replayed on the ranks (a launcher's, or
local workers) -> the profile beside the replayed times, a sweep's busbw with --envelope -> outputs
(--json, the history)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from nccl_bench.cli import messages, on_ranks, verdict_files
from nccl_bench.cli.on_ranks import OnRanks, Ran
from nccl_bench.cli.option_sets import Recording, ReplayOutputs, Workers
from nccl_bench.cli.params import command_of
from nccl_bench.option_types import declared, option_name
from nccl_bench.ranks.layout import detect_launch
from nccl_bench.replay.replay_config import ReplayConfig

if TYPE_CHECKING:
    from nccl_bench.replay.profile import Profile
    from nccl_bench.replay.replay_entry import ReplayJob


@command_of
def replay_command(config: ReplayConfig, local: Workers, outputs: ReplayOutputs, recording: Recording) -> None:
    """A job's collectives from its PyTorch profiler traces, the costliest first; under a launcher or --workers, replayed here beside the job's times."""  # noqa: E501
    workers = local.workers
    from nccl_bench.render.formats import check_output_file  # what a replay needs loads with it, never for --help
    from nccl_bench.replay.replay_entry import read_replay_job

    json_path = check_output_file(outputs.json_file, option_name(ReplayOutputs, "json_file"))
    verdict_files.cleared(json_path)
    job = read_replay_job(config, outputs.envelope, option_name(ReplayOutputs, "envelope"))
    if workers is None and detect_launch() is None:  # no ranks: the profile is the answer
        _say(job, job.profile, json_path, replayed=False)
        return
    on_ranks.ready_for_ranks()
    from nccl_bench.results.run_folder import new_run_dir

    store = on_ranks.recording_target_of(recording, config.results_root)
    ran = on_ranks.run_on_ranks(OnRanks(
        "replay", job.preflight, lambda launch: _on_this_rank(job, launch), config.out,
        new_run_dir(config.results_root, ["replay"]), "collectives replayed so far are kept",
        kept_away=tuple(carried.item for carried in declared(ReplayOutputs).values())), workers)
    if ran.run_dir is None:  # a rank that does not speak for the run
        return
    _say(job, job.replayed_profile(ran.run_dir), json_path, replayed=True)
    on_ranks.record_in_history(ran.run_dir, store)


def _on_this_rank(job: ReplayJob, launch) -> Ran:
    """Under a launcher: plan the points for these ranks and replay them; rank 0 has the run folder."""
    plan = job.points(launch.world_size)
    if on_ranks.speaks_for_run(launch):  # local workers: the process that started them said it
        messages.notes(plan.left_out)
    summary = job.run(launch, messages.end_stuck_rank)
    return Ran(summary.run_dir)


def _say(job: ReplayJob, profile: Profile, json_path: Optional[Path], replayed: bool) -> None:
    """The profile's table and notes on stdout; after a replay, the sentences and the envelope; --json."""
    from nccl_bench.render import replay_text
    from nccl_bench.render.live import make_console, print_lines, table_width
    from nccl_bench.replay.profile import profile_json
    from nccl_bench.results.whole_file import write_text_file

    console = make_console()
    print_lines(console, replay_text.profile_lines(profile, job.config.traces, table_width(console)))
    if replayed:
        print_lines(console, replay_text.replay_lines(profile))
    if replayed or job.envelope is not None:
        print_lines(console, replay_text.envelope_lines(profile, job.envelope, option_name(ReplayOutputs, "envelope")))
    if json_path is not None:
        write_text_file(json_path, json.dumps(profile_json(profile), indent=1) + "\n")
        messages.plain(f"wrote the profile to {json_path}")
