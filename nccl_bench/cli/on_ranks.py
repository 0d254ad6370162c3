"""The one path of every command that runs on ranks (sweep, doctor, replay): under a launcher this
process is a rank and runs its part here; without one it starts local workers (cli/local_workers.py)
that come back here under the elastic launcher. The process that speaks for the run records it in the history.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn, Optional, Sequence

from nccl_bench.cli import messages, streams
from nccl_bench.cli.option_sets import HISTORY, WORKERS, Recording
from nccl_bench.errors import EXIT_INTERRUPTED, EXIT_OK, RunFailedError, UserInputError
from nccl_bench.history.recording import record_run, recording_target
from nccl_bench.option_types import Option
from nccl_bench.ranks.layout import LaunchEnv, detect_launch
from nccl_bench.ranks.preflight import HiddenGpuWarning, check_process_limits
from nccl_bench.units.nccl_env import Variant

if TYPE_CHECKING:
    from nccl_bench.ranks.faults import Interrupted


@dataclass(frozen=True)
class Ran:
    """What this process has of the run: its folder where it speaks for the run (else None), and the
    verdict the ranks reached (an exit code)."""

    run_dir: Optional[Path]
    verdict: int = EXIT_OK


@dataclass(frozen=True)
class OnRanks:
    """A command that runs on ranks, as the one path needs it."""

    what: str  # "sweep", "doctor", "replay": how messages name the run
    refuse_early: Callable[[int], tuple[str, list[str]]]  # local workers -> backend, notes; raises what ranks would
    run_here: Callable[[LaunchEnv], Ran]  # under a launcher: this rank's part (rank 0's folder, the verdict)
    out: Optional[Path]
    default_target: Path
    kept: str  # what an interrupt keeps, in words
    variants: Sequence[Variant] = ((),)  # each in fresh ranks, one after the other (--nccl-env)
    kept_away: tuple[Option, ...] = ()  # options only this process acts on: not passed to local workers
    verdict_on_disk: Callable[[Path], int] = lambda run_dir: EXIT_OK  # a verdict the workers left in the folder


def recording_target_of(recording: Recording, results_root: Path):
    """Where the run will be recorded (None: --no-history), from the command's recording options:
    a history that cannot be one is refused before the run."""
    return recording_target(recording.history, recording.no_history, results_root, recording.history_wait_s)


def ready_for_ranks() -> None:
    """What every command that runs on ranks does first, before torch loads: its files (results.csv,
    meta.json, doctor.json) are the product, so stdout is only a view of them; a process with too few
    files or too little memory to start is refused in one line."""
    streams.stdout_is_a_view()
    check_process_limits()


def run_on_ranks(job: OnRanks, workers: Optional[int]) -> Ran:
    """The launcher's ranks, or local workers: the one fork, written once."""
    launch = detect_launch()
    if launch is None:
        return _with_local_workers(job, workers)
    if workers is not None:
        started = f"{launch.launcher} already started {launch.world_size} rank(s)"
        raise UserInputError(WORKERS.name, f"only applies without a launcher; {started}")
    from nccl_bench.ranks.faults import Interrupted  # the rank side loads when a command runs, never for --help

    if not speaks_for_run(launch):  # what the host hides is said once, by the process that speaks for the run
        warnings.simplefilter("ignore", HiddenGpuWarning)
    try:
        ran = job.run_here(launch)
    except Interrupted as exc:
        _end_interrupted_rank(job, launch, exc)
    return Ran(ran.run_dir if speaks_for_run(launch) else None, ran.verdict if carries_verdict(launch) else EXIT_OK)


def _with_local_workers(job: OnRanks, workers: Optional[int]) -> Ran:
    from nccl_bench.cli import local_workers

    args = worker_args(sys.argv[1:], (*job.kept_away, WORKERS))
    try:
        run_dir = local_workers.start(job.what, workers, job.refuse_early, args, job.out, job.default_target,
                                      job.variants)
    except RunFailedError as exc:  # a rank ended oddly: a verdict already on disk still stands
        run_dir = getattr(exc, "run_dir", None)  # the folder it claimed, if it got that far
        if run_dir is None or not job.verdict_on_disk(run_dir):
            raise
        return Ran(run_dir, job.verdict_on_disk(run_dir))
    return Ran(run_dir, job.verdict_on_disk(run_dir))


def worker_args(args: list[str], kept_away: Sequence[Option]) -> list[str]:
    """The command line for local workers: without the options only this process acts on."""
    with_value = tuple(option.name for option in kept_away if option.takes_value)
    switches = tuple(option.name for option in kept_away if not option.takes_value)
    joined = tuple(f"{name}=" for name in with_value)
    kept, skip_value = [], False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in with_value:
            skip_value = True
        elif arg not in switches and not arg.startswith(joined):
            kept.append(arg)
    return kept


def writes_run_outputs() -> bool:
    """This process writes the run's own output files (--prom): it starts local workers, or it is rank 0."""
    launch = detect_launch()
    return launch is None or launch.rank == 0


def speaks_for_run(launch: LaunchEnv) -> bool:
    """Rank 0 of a launcher's ranks says what happened to the run, unless this process is a local worker."""
    from nccl_bench.ranks.launch import is_local_worker

    return launch.rank == 0 and not is_local_worker()


def carries_verdict(launch: LaunchEnv) -> bool:
    """Rank 0 alone exits with the run's negative verdict (exit 1); every other rank reaches the same
    verdict from the same gathered numbers and exits 0.

    A launcher may end the whole job at the first non-zero exit: Open MPI's mpirun kills every other
    process at once, srun does with --kill-on-bad-exit, torchrun SIGTERMs the other workers. Were every
    rank to exit 1, the first to leave would cut rank 0 off while it still says the run's last lines
    (the report's closing lines, --prom, the history): the others have nothing left to say, so rank 0,
    the last to need its time, is the one whose exit ends the job. The launcher's code is unchanged
    (mpirun, srun and torchrun exit 1, and --workers reads rank 0's); failures and interrupts keep their
    codes on every rank (each has its own rule for who speaks, ranks/faults.py)."""
    return launch.rank == 0


def record_in_history(run_dir: Path, address) -> None:
    """Record the finished run where --history says (None: --no-history); a failure is a warning, the exit
    unchanged. A Ctrl-C or SIGTERM while the history keeps it waiting ends the command at once (130),
    saying the run is whole and how to add it later."""
    if address is None:
        return
    from nccl_bench.ranks.faults import Interrupted, signals_raise_interrupted

    try:
        with signals_raise_interrupted():
            recorded = record_run(run_dir, address, messages.say_naming_history)
    except (Interrupted, KeyboardInterrupt) as exc:
        why = f"by {exc}" if isinstance(exc, Interrupted) else "by SIGINT"
        messages.fail(f"interrupted {why} while recording the run: it was not recorded in the history; it is whole "
                      f"in {run_dir}: add it later with `{add_later(run_dir, address)}`", EXIT_INTERRUPTED)
    if recorded.failure is not None:
        messages.say(f"warning: the run was not recorded in the history ({messages.history_named(recorded.failure)}); "
                     "it is whole in "
                     f"{run_dir}: add it later with `{add_later(run_dir, address)}`")
        return
    # where the command wrote, as `wrote csv to`; the id is what `history check --run` judges in CI
    messages.plain(f"recorded run {(recorded.run_id or '')[:12]} in the history {address.shown}")


def add_later(run_dir: Path, address) -> str:
    """The command that adds the run to the same history later (a server's URL left for the user to give:
    its password is never printed)."""
    from nccl_bench.history.address import SQLITE

    where = shlex.quote(address.target) if address.kind == SQLITE else "URL"
    return f"nccl-bench history add {shlex.quote(str(run_dir))} {HISTORY.name} {where}"


def _end_interrupted_rank(job: OnRanks, launch: LaunchEnv, exc: Interrupted) -> NoReturn:
    if not exc.began:
        end_interrupted(launch, f"interrupted by {exc} before the {job.what} began; nothing was measured")
    end_interrupted(launch, f"interrupted by {exc}; {job.kept}")


def end_interrupted(launch: LaunchEnv, message: str) -> NoReturn:
    """Exit 130, saying why once (on the rank that speaks for the run), then at once.

    A scheduler's grace before SIGKILL is short (Slurm's KillWait; 5 s on the test cluster), and the
    interpreter's final garbage collection of torch's objects took ~5 s on a loaded host; the life
    cycle has already written meta.json and every row, and destroyed the process group."""
    if speaks_for_run(launch):
        messages.error(message)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe must not delay the exit
            stream.flush()
    os._exit(EXIT_INTERRUPTED)
