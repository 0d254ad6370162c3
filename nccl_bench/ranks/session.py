"""The run life cycle every command on ranks goes through (sweep, doctor, replay): one copy, a fix fixes all.

In order, on every rank: the launcher's layout; the device this rank uses and a memory check for the
buffers; the run folder (rank 0; removed again if nothing was written to it); signals as
Interrupted; the process group; the common header (hosts, devices, versions); the command's own
set-up; meta.json "running"; the command's measurements under the per-step deadline; and at every end
the final meta.json, written exactly once, with a status that says how the run ended. Every failure
goes through one mapping (faults.why_stopped): the rank at fault named, a timeout named with --timeout.

A command supplies a `RunRequest` (what the life cycle needs to know) and a `RunBody` (its own steps).
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from nccl_bench.errors import EXIT_INTERRUPTED, OptionError, RunFailedError, UserInputError, WriteFailedError
from nccl_bench.ranks import devices, dist, faults, native_output, roll_call, run_facts, run_owner, star_gather
from nccl_bench.ranks.deadline import Deadline, DeadlineExceeded
from nccl_bench.ranks.launch import LOCAL_WORKER_ENV
from nccl_bench.ranks.layout import LaunchEnv, detect_launch, export_launch_env
from nccl_bench.ranks.planted import fault_seam
from nccl_bench.ranks.positions import Positions
from nccl_bench.ranks.preflight import check_memory, host_available_bytes
from nccl_bench.ranks.set_up import SetUp
from nccl_bench.results.run_folder import claim_run_dir, find_claimed, new_run_dir, release_run_dir, write_meta
from nccl_bench.units.clock import utc_now_iso
from nccl_bench.units.passwords import hide_written

META_SCHEMA_VERSION = 1
NO_LAUNCHER = "no rank layout found (run under torchrun, srun or mpirun, or use {workers})"


@dataclass(frozen=True)
class RunRequest:
    """What the life cycle needs from a command before any process group exists."""

    command: str  # sweep | doctor | replay: in meta.json and in "setting up the <command> failed"
    backend: str  # already chosen and checked (devices.choose_backend, check_backend_built)
    timeout_s: float
    out: Path | None
    results_root: Path
    folder_label: Sequence[str]  # words of the default folder name (the ops, "doctor", "replay")
    bytes_per_rank: int  # buffers this rank allocates, for the memory check
    size_option: str  # the option (its key) that makes the buffers large (named when memory is short)
    config: dict[str, Any]  # the command's options as meta.json records them
    continues: bool = False  # a later --nccl-env variant: the run folder is the first variant's, kept as it is
    control: bool = False  # the helpers' exchanges on a gloo side group (dist.DistContext.control)
    size_remedy: str | None = None  # what to do when memory is short, where size_option has no value to lower
    # A run that measures nothing, where rank 0 owns MASTER_PORT (star_gather.serves): the ranks meet at
    # rank 0's socket and never import torch (most of such a run at scale); no buffers, group or device.
    without_torch: bool = False


class Run:
    """What a body sees of its run: the layout, the process group, the run folder and the deadline."""

    def __init__(self, request: RunRequest, launch: LaunchEnv, run_dir: Path | None):
        self.request, self.launch, self.run_dir = request, launch, run_dir
        self.ctx: dist.DistContext | None = None
        self.set_up: SetUp | None = None  # the set-up watch, from the process group on
        self.hostnames: list[str] = []
        self.devices: list[str] = []
        self.versions: dict[str, str] = {}
        self.status = "running"
        self.started_utc = ""
        self.deadline: Deadline | None = None  # the per-step deadline, while the body measures
        # Set-up costs, the slowest rank's, in seconds (meta.json's "timings", the header's set-up line):
        # init_s (the process group made), first_op_s (the first collective, where NCCL 2.22+ connects),
        # and what a body adds (split_s: --split's groups).
        self.timings: dict[str, float] = {}
        self.own_init_s = 0.0  # this rank's own init_s, until the common header agrees on the slowest
        self.watch: run_owner.ParentWatch | None = None
        self.failure: str | None = None  # the failure's line, as the run reports it (meta.json)
        # where this rank stands: said on a stall (without torch there is no process group, and no recorder)
        self.positions = Positions("" if request.without_torch else request.backend)

    def time_set_up(self, key: str, seconds: float) -> None:
        """Record a set-up cost as the slowest rank's (a collective: every rank calls it, in the same order)."""
        self.timings[key] = dist.max_across_ranks(self.ctx, [seconds])[0]

    def facts(self) -> run_facts.RunFacts:
        """The run's facts for a header: known once the common header is gathered (before the body's set-up)."""
        return run_facts.RunFacts(self.request.backend, self.launch.launcher, self.launch.world_size,
                                  tuple(self.hostnames), tuple(self.devices), dict(self.versions), self.run_dir,
                                  dict(self.timings))

    def renew(self, where: str | None = None, at: tuple[str, int | None, str | None] | None = None) -> None:
        """A step starts: it has --timeout from now (no-op outside the measuring phase). at: a point
        starts here (op, size in bytes, group; None for the whole world): where this rank stands."""
        if at is not None:
            self.positions.begin(*at)
        if self.deadline is not None:
            self.deadline.renew(where)

    def disarm(self) -> None:
        """A point or measurement is over: nothing of ours waits on the process group until the next renew."""
        self.positions.end()
        if self.deadline is not None:
            self.deadline.disarm()

    def meta(self) -> dict[str, Any]:
        """The meta.json keys every command writes."""
        ended = None if self.status == "running" else utc_now_iso()
        return {
            "tool": "nccl_bench",
            "command": self.request.command,
            "schema_version": META_SCHEMA_VERSION,
            "status": self.status,
            "started_utc": self.started_utc,
            "ended_utc": ended,
            "command_line": [hide_written(arg) for arg in getattr(sys, "orig_argv", sys.argv)],
            "backend": self.request.backend,
            "launcher": self.launch.launcher,
            "world_size": self.launch.world_size,
            "nodes": self.facts().nodes,
            "hostnames": list(self.hostnames),
            "devices": list(self.devices),
            "versions": dict(self.versions),
            # As this rank saw them (not versions: a container's NCCL_VERSION names the NCCL it was
            # built for; versions["nccl"] is the library torch loaded).
            "env": run_facts.recorded_env(os.environ),
            "config": self.request.config,
            "timings": dict(self.timings),
            # Who writes the run (report checks that a "running" one still is) and which elastic attempt.
            "pid": os.getpid(),
            "host": dist.hostname(),
            "attempt": run_owner.attempt(os.environ),
            **({"stopped_because": self.watch.why} if self.watch is not None and self.watch.why else {}),
            **({"error_handling": self.ctx.error_handling} if self.ctx is not None and self.ctx.error_handling else {}),
            **({"failure": self.failure} if self.failure else {}),
            **self.positions.meta(),  # where each rank stood, after a stall; a flight recorder torch lacks
        }


class RunBody(Protocol):
    """A command's own steps on the shared life cycle."""

    where: str  # what is being done now: named in a failure message

    def set_up(self, run: Run) -> None:
        """After the common header, before the first meta.json: collectives allowed (a peak, a layout)."""

    def measure(self, run: Run) -> None:
        """The measurements, under the per-step deadline (run.renew at each step, run.disarm after)."""

    def meta(self) -> dict[str, Any]:
        """The command's own meta.json keys, in the running and the final meta.json alike."""

    def close(self, status: str) -> dict[str, Any]:
        """The run ended with `status`: close files; return keys only the final meta.json has."""

    def finished(self, status: str) -> None:
        """After the final meta.json: tell the observer (rank 0's reporter)."""


def require_launch() -> LaunchEnv:
    launch = detect_launch()
    if launch is None:
        raise OptionError("launcher", NO_LAUNCHER, mentions=("workers",))
    return launch


def _device_index(request: RunRequest, launch: LaunchEnv) -> int | None:
    """This rank's GPU (never one that does not exist) with room for the buffers; None on CPU."""
    if devices.device_kind(request.backend) != "cuda":
        check_memory(request.bytes_per_rank, launch.local_world_size, host_available_bytes(), "host",
                     request.size_option, request.command, request.size_remedy)
        return None
    import torch

    index = devices.cuda_device_index(
        launch.local_rank, launch.local_world_size, torch.cuda.device_count(), os.environ, launch.launcher)
    free, _total = torch.cuda.mem_get_info(index)
    check_memory(request.bytes_per_rank, 1, free, f"GPU {index}", request.size_option, request.command,
                 request.size_remedy)
    return index


def execute(request: RunRequest, body: RunBody, on_stuck: Callable[[RunFailedError], None] | None = None) -> str:
    """Run `body` on this rank through the whole life cycle; returns the final status.

    on_stuck(RunFailedError): called from the deadline's thread when a stalled step cannot be ended
    by aborting the process group (meta.json already says failed); it should report and end the
    process. Without it a rank stuck outside any collective stays stuck.
    """
    launch = require_launch()
    with run_owner.ParentWatch(os.environ, launch.launcher) as watch:
        return _execute(request, body, on_stuck, launch, watch)


def _execute(request: RunRequest, body: RunBody, on_stuck: Callable[[RunFailedError], None] | None,
             launch: LaunchEnv, watch: run_owner.ParentWatch) -> str:
    device_index = None if request.without_torch else _device_index(request, launch)
    export_launch_env(launch)  # a missing MASTER_ADDR is named before any folder is made
    run_dir, made = _run_folder(request) if launch.rank == 0 else (None, False)
    run = Run(request, launch, run_dir)
    run.watch = watch
    run.set_up = SetUp(request.command, on_stuck)
    try:
        with faults.signals_raise_interrupted():
            started = time.perf_counter()
            opened = star_gather.opened(launch, request.backend, request.timeout_s, request.command) if (
                request.without_torch) else dist.process_group(
                launch, request.backend, request.timeout_s, device_index, request.control, set_up=run.set_up)
            with opened as ctx:
                run.ctx, run.own_init_s = ctx, time.perf_counter() - started
                if ctx.star is None:
                    roll_call.publish_process(ctx.rank)
                _LifeCycle(run, body, on_stuck).go()
    except RuntimeError as exc:  # process-group set-up; no result was at stake yet
        release_run_dir(run_dir, made)
        reason = faults.name_timeout(native_output.backend_error_text(exc), request.timeout_s)
        failure = RunFailedError(f"setting up the {request.command} failed on rank {launch.rank}: {reason}")
        failure.details = getattr(exc, "details", ())
        raise failure from exc
    except (RunFailedError, UserInputError):
        release_run_dir(run_dir, made)  # stopped before meta.json: the folder would only say nothing happened
        raise
    except faults.Interrupted as exc:
        if run.status != "running":  # the final meta.json says how the run ended
            raise
        release_run_dir(run_dir, made)
        raise faults.Interrupted(str(exc), began=False) from None
    return run.status


def _run_folder(request: RunRequest) -> tuple[Path, bool]:
    """Rank 0 claims the run folder (--out, or a new default one; a restarted attempt's is its first
    attempt's); and whether this run made it (a folder made for nothing is removed again)."""
    claimant = run_owner.claimant(os.environ)
    target = request.out
    if target is None and run_owner.attempt(os.environ) > 0:
        target = find_claimed(request.results_root, claimant)
    if target is not None:
        made = not target.exists()
        return claim_run_dir(target, "out" if request.out is not None else "results_root", claimant), made
    default = new_run_dir(request.results_root, request.folder_label)
    return claim_run_dir(default, "results_root", claimant, numbered=True), True


class _Ending:
    """The final meta.json, written once: by the main thread, or by the deadline's thread for a rank
    whose main thread is stuck for good."""

    def __init__(self, write: Callable[[str], None]):
        self._write, self._lock, self.done = write, threading.Lock(), False

    def __call__(self, status: str) -> None:
        with self._lock:
            if not self.done:
                self.done = True
                self._write(status)


@dataclass
class _LifeCycle:
    run: Run
    body: RunBody
    on_stuck: Callable[[RunFailedError], None] | None
    _meta_written: bool = field(default=False, init=False)
    _unwritten: WriteFailedError | None = field(default=None, init=False)  # the final meta.json's failure

    def go(self) -> None:
        run, body = self.run, self.body
        try:
            with run.set_up.until_done():
                self._describe()
                body.set_up(run)
        except UserInputError:  # what the layout cannot do, seen alike by every rank: refused, not failed
            raise
        except Exception as exc:  # the header exchanges, the body's set-up: the set-up's own line, on every rank
            raise self._set_up_failed(exc) from exc
        run.started_utc = utc_now_iso()
        ending = _Ending(self._write_final)
        deadline = Deadline(run.request.timeout_s, self._abort, self._stuck(ending) if self.on_stuck else None)
        try:  # from the first meta.json on, the run ends with a final one whatever happens
            if run.run_dir is not None:
                write_meta(run.run_dir, {**run.meta(), **body.meta()})
                self._meta_written = True
            run.deadline = deadline
            with deadline, self._answering(ending):
                body.measure(run)
            run.status = "complete"
        except (faults.Interrupted, Exception) as exc:
            deadline.close()  # the main thread is back: the roll call below must not be taken for a stall
            faults.hold_signals()
            stop = self._stop(exc, deadline)
            if stop is exc:
                raise
            raise stop from (None if isinstance(exc, faults.Interrupted) else exc)
        finally:
            run.deadline = None
            faults.hold_signals()  # a signal after the last result changes nothing: the ending is written whole
            ending(run.status)
            fault_seam(os.environ).last_lines_due(run.launch.rank, lambda: _others_running_here(run.ctx))
            body.finished(run.status)
            fault_seam(os.environ).run_ended(run.launch.rank)
            if self._unwritten is not None:
                self._say_unwritten()

    def _set_up_failed(self, exc: Exception) -> BaseException:
        """A set-up step failed after the process group was made: the set-up's one line (who never
        became ready, who stalled, who died, with the hosts they registered from: ranks/set_up.py),
        said by every rank that can, as before the group existed; the lowest-live-rank rule of a
        failed measurement (faults.why_stopped) would leave it to rank 0 alone. An interrupt instead
        when a stop signal came with the failure (the whole run is being stopped)."""
        run = self.run
        faults.hold_signals()  # a launcher SIGTERMs the rest once one rank leaves: the line comes first
        if run.ctx.star is not None:  # the star's own line names who is missing; no store to leave notes in
            return star_gather.failure(exc, run.ctx.rank, "the run's first exchanges")
        reason = faults.name_timeout(native_output.backend_error_text(exc), run.request.timeout_s)
        roll_call.mark_leaving(run.ctx, f"setting up the {run.request.command} failed on rank {run.ctx.rank}: "
                                        f"{reason}")  # for a peer already measuring (faults reads it)
        failure = run.set_up.failure(reason)
        signalled = faults.pending_signal()
        return failure if signalled is None else faults.Interrupted(signalled, began=False)

    def _describe(self) -> None:
        """Hosts, devices and versions of the whole world, gathered once for every command."""
        run, ctx = self.run, self.run.ctx
        device_name = run_facts.device_name(ctx.device, ctx.star is not None)
        started = time.perf_counter()  # the first collective: NCCL 2.22+ opens its connections here
        per_rank = dist.gather_objects(ctx, (dist.hostname(), device_name, dist.this_machine(os.environ),
                                             os.urandom(8).hex()),  # rank 0's: the run's nonce in the store
                                       "its host name")
        first_op_s = time.perf_counter() - started if ctx.control is None else _first_op_s(ctx)
        init_s, first_op_s = dist.max_across_ranks(ctx, [run.own_init_s, first_op_s])
        run.timings.update(init_s=init_s, **({} if first_op_s < 0 else {"first_op_s": first_op_s}))
        run.hostnames = [h for h, *_ in per_rank]
        run.devices = [d for _, d, *_ in per_rank]
        run.positions.nonce = per_rank[0][3]
        shared = dist.shared_hostname(run.hostnames, [m for _, _, m, _ in per_rank])
        if shared is not None:  # seen alike by every rank, before anything is measured
            raise UserInputError("hostname", shared)
        import nccl_bench

        stack = {key: value for key, (value, _) in run_facts.stack_versions(ctx.on_gpu, ctx.star is not None).items()}
        # nccl-bench's own version too: a new tool may measure differently (the history says what changed)
        run.versions = {"torch": stack["torch"], "python": platform.python_version(),
                        "nccl_bench": nccl_bench.__version__}
        if ctx.on_gpu:
            from nccl_bench.hardware.host import proc_driver_version

            driver = proc_driver_version()
            if driver:
                run.versions["driver"] = driver
            run.versions.update(cuda=stack["cuda"], nccl=stack["nccl"])

    def _stop(self, exc: BaseException, deadline: Deadline) -> BaseException:
        """What ended the run early, as the exception to raise; sets the status it ended with."""
        run = self.run
        if run.watch is not None and run.watch.gone():  # the peers lost the same parent: no one is at fault
            run.status = "interrupted"
            return exc if isinstance(exc, faults.Interrupted) else faults.Interrupted("SIGTERM")
        if deadline.expired is not None and not isinstance(exc, faults.Interrupted):
            # what the abort made the op raise; this thread is back, so the stall was not this rank's
            exc = DeadlineExceeded(deadline.expired, run.request.timeout_s, came_back=True)
        stop = star_gather.failure(exc, run.ctx.rank, self.body.where) if run.ctx.star is not None else (
            faults.why_stopped(exc, run.ctx, run.request.timeout_s, self.body.where, run.hostnames, run.positions))
        run.status = "interrupted" if isinstance(stop, faults.Interrupted) else "failed"
        if isinstance(stop, RunFailedError):
            run.failure = str(stop)
            stop.exit_at_once = deadline.expired is not None
        return stop

    def _write_final(self, status: str) -> None:
        self.run.status = status
        try:
            final = self.body.close(status)
            if self._meta_written:
                write_meta(self.run.run_dir, {**self.run.meta(), **self.body.meta(), **final})
        except WriteFailedError as exc:  # a full disk: the line says what meta.json was left saying
            self._unwritten = exc

    def _say_unwritten(self) -> None:
        """The final meta.json could not be written: the run's line says so (after its own failure, if any)."""
        said = str(self._unwritten) + (': it still says "running"' if self._meta_written else "")
        failure = sys.exc_info()[1]
        if isinstance(failure, RunFailedError):
            raise RunFailedError(f"{failure}; {said}") from failure
        raise RunFailedError(said) from failure

    def _abort(self, exc: DeadlineExceeded) -> None:  # on a thread of the deadline's
        if self.run.ctx.star is not None:  # the main thread's wait on a socket ends with an error
            self.run.ctx.star.close()
            return
        faults.record_stall(exc, self.run.ctx, self.run.positions)
        # Every group, looked up now, not held: a reference kept past destroy_process_group would let
        # a group's destructor run at interpreter exit ("terminate called without an active exception").
        dist.abort_all_groups()

    def _answering(self, ending: _Ending):
        """A stop signal the main thread cannot answer (blocked in a C call: a GPU synchronize, a gloo
        wait on a frozen peer) is answered by the signal's thread: the report and the final meta.json
        within torchrun's 30 s before SIGKILL, not at the deadline (--timeout, 300 s by default)."""
        import contextlib

        if self.on_stuck is None or self.run.ctx.star is not None:  # the star waits in Python: signals land
            return contextlib.nullcontext()

        def unanswered(signal_name: str) -> None:  # on the signal watcher's thread
            run = self.run
            speaks = run.launch.rank == 0 and not os.environ.get(LOCAL_WORKER_ENV)
            failure = faults.unanswered(signal_name, run.ctx, run.request.timeout_s, self.body.where,
                                        run.hostnames, speaks, run.positions)
            run.failure = None if failure.exit_code == EXIT_INTERRUPTED else str(failure)
            ending("interrupted" if failure.exit_code == EXIT_INTERRUPTED else "failed")
            self.on_stuck(failure)

        return faults.unanswered_signals(unanswered)

    def _stuck(self, ending: _Ending) -> Callable[[DeadlineExceeded], None]:
        def stuck(exc: DeadlineExceeded) -> None:  # on the deadline's thread
            failure = star_gather.failure(exc, self.run.ctx.rank, exc.where) if self.run.ctx.star is not None else (
                faults.abandoned(exc, self.run.ctx, self.run.request.timeout_s, self.run.hostnames, self.run.positions))
            ending("failed")
            self.on_stuck(failure)

        return stuck


def _others_running_here(ctx: dist.DistContext) -> bool:
    """Another rank on this host is still running (a planted fault's wait: ranks/planted.py)."""
    return "running" in roll_call.local_peer_states(ctx).values()


def _first_op_s(ctx: dist.DistContext) -> float:
    """With the helpers on a gloo side group, the backend's own first collective: one all_reduce of one
    element, timed to its end; -1 when the backend refuses it (an NCCL_ALGO that leaves all_reduce no
    algorithm: every all_reduce point will say so as an unsupported row)."""
    import torch

    started = time.perf_counter()
    try:
        torch.distributed.all_reduce(torch.ones(1, device=ctx.device), group=ctx.group)
        dist.synchronize(ctx)
    except RuntimeError:
        return -1.0
    return time.perf_counter() - started
