"""A rank's set-up and tear-down under --timeout, with a roll call of the ranks that joined.

Set-up is every step before the measurements: the rendezvous store, the process group and its side
and sub-groups, the run's first exchanges (hosts, devices) and the command's own set-up; tear-down is
the process group's destruction. Each step must end within --timeout (+ deadline.MARGIN_S) of its
last progress, as a measuring step must (ranks/deadline.py), and for the same reason: these steps
wait in native code. torch's ProcessGroupGloo constructor connects every pair of ranks
(connectFullMesh, torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, read in torch 2.13) with the GIL
released: it waits in the store for each peer's address and connects to each, every wait with the
group's timeout and every connect with gloo's own retries, so one absent or slow rank can hold its
peers for a multiple of --timeout while the main thread never returns to Python. Then no Python-level
check runs, nor a SIGTERM's handler (Python runs handlers on the main thread, between bytecodes): the
signal is caught and never handled. A watchdog thread (deadline.Deadline) keeps the clock instead;
a step still stuck GRACE_S after its abort ends the process through `on_stuck` with the line below.
A stop signal is answered by the signal watcher's thread (faults.unanswered_signals) when the main
thread has not run its handler within faults.UNANSWERED_SIGNAL_S: the rank ends then, through
`on_stuck`, with the interrupt's line, not at its deadline.

Who joined: every rank registers in the rendezvous store (its host and pid) as soon as the store
answers, then waits until every rank has. The wait makes progress while ranks keep arriving and
fails --timeout after the last arrival, naming the ranks that never came. A rank marks itself ready
once its process group exists; a failure before that names the ranks that joined but never became
ready (with the host they registered from, and, on this host, whether the process died), and the
ranks whose watchdog fired in an earlier step than this rank's own (they held the others up); past
the process group, also the ready ranks that died (seen on this host). Until set-up is over the ranks
cannot agree on one of them to speak (a peer may never have made its group), so every rank that can
still reach the store says the line (the same names from each), after the group exists too
(session._LifeCycle). A stalled rank also leaves the roll call's note (ranks/roll_call.py) that a
failure mapped by ranks/faults.py names, as a stalled measuring step does.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import time
from typing import Any, Callable, Iterator

from nccl_bench.errors import EXIT_INTERRUPTED, RunFailedError
from nccl_bench.ranks import faults, roll_call, run_owner
from nccl_bench.ranks.deadline import GRACE_S, MARGIN_S, Deadline, DeadlineExceeded
from nccl_bench.ranks.dist import (
    DEFAULT_PG_PREFIX,
    abort_all_groups,
    hostname,
    waited_text,
)
from nccl_bench.ranks.launch import is_local_worker
from nccl_bench.ranks.layout import LaunchEnv
from nccl_bench.ranks.native_output import HeldOutput, backend_diagnostics, backend_error_text, without_native_logs
from nccl_bench.ranks.planted import fault_seam

JOINED_COUNT = "nccl_bench/set_up/joined"
TEARING_DOWN = "tearing down the process group"  # the last step's name
REPORTED_COUNT = "nccl_bench/set_up/reported"
JOIN_POLL_S = 0.25  # how often a rank reads the joined count: 64 ranks ask ~256 times a second, cheap for the store
# After a failure in set-up, how long a rank waits for the peers that joined to say they are ready or
# failed too: a live peer sees the same failure within moments; a dead or stuck one never answers.
ROLL_CALL_S = 3.0
# The store's client timeout while the failure line is gathered: a store gone or stuck must not hold it.
STORE_REPORT_TIMEOUT_S = 5.0
# How long the rank holding the store (rank 0 under env://) stays after its failure so that its peers
# can still read the roll call: its exit takes the store with it.
LINGER_S = 5.0
# A rank ends within --timeout + ENDS_WITHIN_S of its last progress in any set-up or tear-down step:
# the deadline's margin and grace, then the roll call, the store reads of its report and (the store's
# host) the wait for its peers to read theirs.
ENDS_WITHIN_S = MARGIN_S + GRACE_S + ROLL_CALL_S + STORE_REPORT_TIMEOUT_S + LINGER_S


def _joined_key(rank: int) -> str:
    return f"nccl_bench/set_up/joined/{rank}"


def _ready_key(rank: int) -> str:
    return f"nccl_bench/set_up/ready/{rank}"


def _failed_key(rank: int) -> str:
    return f"nccl_bench/set_up/failed/{rank}"


# A socket error that a rank sees when the process holding the store (rank 0 under env://) has ended: a
# consequence, which its own failure line explains.
_CONNECTION_LOST = re.compile(r"connection reset|broken pipe|connection refused|connection closed", re.I)

class SetUp:
    """One rank's set-up: its deadline (a watchdog thread while a step runs), its registration in
    the store and the failure line that names who is missing.

    command: named in the failure line ("setting up the doctor failed: ...").
    on_stuck(RunFailedError): called on the watchdog thread when a step stays stuck past its grace;
    it is expected to report and end the process (None: only abort, as session.execute's on_stuck).
    """

    def __init__(self, command: str = "run", on_stuck: Callable[[RunFailedError], None] | None = None):
        self.command, self._on_stuck = command, on_stuck
        self.rank, self.world_size, self.timeout_s = 0, 1, 0.0
        self.store: Any = None
        self.notes_store: Any = None
        self.hosts_store = False  # this rank's process holds the store (env:// rank 0)
        self.ready_done = False
        self._where, self._step_index = "", 0  # the step running now, and its place in the order of steps
        self._deadline: Deadline | None = None
        self._answering = contextlib.ExitStack()  # while armed: faults.unanswered_signals(self._unanswered)
        self._release_output: Callable[[], None] = lambda: None
        self._native_warnings: HeldOutput | None = None  # stderr, from the process group until set-up is over

    # -- the clock ------------------------------------------------------------------------------
    def start(self, rank: int, world_size: int, timeout_s: float,
              release_output: Callable[[], None] = lambda: None) -> None:
        """The first step starts now. release_output: gives the terminal back (held output) before
        the watchdog reports."""
        self.rank, self.world_size, self.timeout_s = rank, world_size, timeout_s
        self._release_output = release_output
        self._arm()

    def _arm(self) -> None:
        self._deadline = Deadline(self.timeout_s, self._abort, self._stuck if self._on_stuck else None)
        self._deadline.__enter__()
        if self._on_stuck is not None:  # a stop signal the main thread cannot answer is answered for it
            self._answering.enter_context(faults.unanswered_signals(self._unanswered))

    def step(self, where: str) -> None:
        """A step starts: it has --timeout from now (no-op once set-up is over)."""
        if self._deadline is not None:
            if where != self._where:
                self._where, self._step_index = where, self._step_index + 1
            self._deadline.renew(where)

    def close(self) -> None:
        """The main thread is back (set-up over, or failed with an answer of its own): no watchdog."""
        if self._deadline is not None:
            self._deadline.close()
            self._deadline = None
        self._answering.close()

    @contextlib.contextmanager
    def until_done(self) -> Iterator[None]:
        """The rest of the set-up (the run's first exchanges, the command's own): the watchdog stops when
        it ends, whichever way, before the failure is mapped (a roll call must not be taken for a stall).
        Once it succeeds, what native code wrote to stderr meanwhile is passed on."""
        self.step("the run's first exchanges")
        try:
            yield
        finally:
            self.close()
        self._end_native_warnings(passed=True)

    # -- torch's own warnings ----------------------------------------------------------------------
    def hold_native_warnings(self) -> None:
        """From the moment the process group exists until set-up is over, hold stderr (native_output.
        HeldOutput). A peer that is missing or slow makes torch's store client log a warning per failed wait
        (c10's `[W socket.cpp:...] [c10d] waitForInput: ... timed out`, written by c10 logging straight to
        the process's stderr, from any thread, at TORCH_CPP_LOG_LEVEL's default WARNING) above the failure's
        one line, which already says who is missing; a set-up that succeeds passes them on unchanged."""
        self._native_warnings = HeldOutput(fds=(2,), passed_on_failure=without_native_logs)
        self._native_warnings.__enter__()

    def drop_native_warnings(self) -> None:
        """The set-up failed and the process group is torn down (its abort warns too): torch's own lines are
        dropped, so the failure's line is the only one, and what else was written (a note) is passed on;
        no-op once passed on."""
        self._end_native_warnings(passed=False)

    def _end_native_warnings(self, passed: bool) -> None:
        held, self._native_warnings = self._native_warnings, None
        if held is None:
            return
        held.__exit__(None if passed else RunFailedError, None, None)

    def _give_terminal_back(self) -> None:
        """Before the watchdog reports and ends the process: every descriptor held is given back."""
        self._release_output()
        if self._native_warnings is not None:
            self._native_warnings.release()

    def tear_down(self) -> None:
        """The process group is destroyed next: a step of its own, under a fresh watchdog."""
        self.close()
        self._arm()
        self.step(TEARING_DOWN)

    def _abort(self, exc: DeadlineExceeded) -> None:  # on a thread of the deadline's
        line = f"{exc.where} failed on rank {self.rank}: {exc}"
        self._say_failed(f"{exc.where} made {exc}", stalled=True)
        with contextlib.suppress(Exception):
            roll_call.note_leaving(self.notes_store or self.store, self.rank, line)  # what faults.why_stopped reads
        abort_all_groups()

    def _stuck(self, exc: DeadlineExceeded) -> None:  # on the deadline's thread: the main thread is gone for good
        self._give_terminal_back()
        self._on_stuck(self.failure(f"{exc.where} made {exc}", stalled=True))

    def _unanswered(self, signal_name: str) -> None:  # on the signal watcher's thread
        """A stop signal came while the main thread sits in native code (a connect, a store wait, the
        group's destruction), where Python never runs its handler: the rank ends now with the line an
        interrupt gets (said by the rank that speaks for the run), not at its deadline."""
        self._give_terminal_back()
        if self._where == TEARING_DOWN:
            said = (f"interrupted by {signal_name} while {TEARING_DOWN} (it did not return to answer it); "
                    "the run's results are kept")
        else:
            said = (f"interrupted by {signal_name} before the {self.command} began ({self._where} did not return "
                    "to answer it); nothing was measured")
        self._on_stuck(RunFailedError(said, exit_code=EXIT_INTERRUPTED,
                                      quiet=self.rank != 0 or is_local_worker()))

    # -- the roll call --------------------------------------------------------------------------
    def join_store(self, launch: LaunchEnv, timeout_s: float, group_timeout_s: float, held: Any) -> Any:
        """The rendezvous store, once every rank has registered in it (join). A store that cannot be
        reached fails as the rendezvous: its address, port and wait named. held: the output held
        meanwhile (native_output.HeldOutput: torch's client prints a stack per failed connection attempt)."""
        import torch.distributed as tdist

        self.step("opening the rendezvous store")
        try:
            with held:
                store, hosts_store = rendezvous_store(launch, _dt.timedelta(seconds=group_timeout_s))
        except (tdist.DistNetworkError, tdist.DistStoreError) as exc:
            self.close()
            where = f"MASTER_ADDR={os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')}"
            failure = RunFailedError(
                f"rendezvous at {where} failed on rank {launch.rank} {waited_text(timeout_s, group_timeout_s)} "
                f"({backend_error_text(exc)}); check that address and port, and that every rank started"
            )
            failure.details = backend_diagnostics(held.text)
            raise failure from None
        self.join(store, hosts_store)
        return store

    def join(self, store: Any, hosts_store: bool) -> None:
        """Register in the store, then wait until every rank has; RunFailedError naming the ranks that
        never came once --timeout passes without another arriving."""
        self.store, self.hosts_store = store, hosts_store
        self.step("joining the rendezvous")
        store.set(_joined_key(self.rank), f"{hostname()} {os.getpid()}")
        joined = store.add(JOINED_COUNT, 1)
        fault_seam(os.environ).joined(self.rank)
        progress = time.monotonic()
        while joined < self.world_size:
            time.sleep(JOIN_POLL_S)
            now = store.add(JOINED_COUNT, 0)
            if now > joined:
                joined, progress = now, time.monotonic()
                self.step("joining the rendezvous")
            elif time.monotonic() - progress > self.timeout_s:
                self.close()  # back in time: the roll call below is no stall
                raise self.failure(f"joining the rendezvous made no progress for more than {self.timeout_s:g} s "
                                   f"(--timeout {self.timeout_s:g} s)")

    def ready(self, notes_store: Any) -> None:
        """This rank's process group exists; notes_store: where the roll call's notes live from now on
        (the default group's store, which ranks/faults.py reads)."""
        self.ready_done, self.notes_store = True, notes_store
        with contextlib.suppress(Exception):
            self.store.set(_ready_key(self.rank), "1")

    def start_failed(self, cause: str, timeout_s: float) -> RunFailedError:
        """The process group could not start (gloo's store waits and connects): the failure named as a
        timeout where it was one."""
        return self.failure(faults.name_timeout(cause, timeout_s))

    def failure(self, reason: str, stalled: bool = False) -> RunFailedError:
        """The one line of a failed set-up: who never joined, who joined but never became ready, who
        stalled in an earlier step, and what this rank saw (stalled: its own watchdog fired). Said by
        every rank that reaches the store."""
        self._say_failed(reason, stalled)
        silent: list[int] = []
        try:
            absent = self._absentees(silent)
        except Exception:  # the store went with the rank that held it
            absent = "rank 0, which holds the rendezvous store, stopped answering"
        with contextlib.suppress(Exception):
            self.store.add(REPORTED_COUNT, 1)
        if self.hosts_store:
            self._linger(len(silent))
        names = f"{absent}; " if absent else ""
        if not self.hosts_store and _CONNECTION_LOST.search(reason):
            reason += " (the rank that holds the rendezvous store ended first; its own line says why)"
        return RunFailedError(f"setting up the {self.command} failed: {names}rank {self.rank} saw: {reason}")

    def _say_failed(self, reason: str, stalled: bool = False) -> None:
        """This rank's failure in the store: its step's place in the order, whether its own watchdog
        fired (a stall of its own, not a wait on others), and what it saw."""
        with contextlib.suppress(Exception):
            self.store.set_timeout(_dt.timedelta(seconds=STORE_REPORT_TIMEOUT_S))
            self.store.set(_failed_key(self.rank), f"{self._step_index}|{int(stalled)}|{reason}")

    def _absentees(self, silent_out: list[int]) -> str:
        """'rank 7 never joined; rank 3 (node004, pid 1234: died) joined but never finished setting up;
        rank 2 (node003) stalled: joining the rendezvous made no progress ...', after waiting up to
        ROLL_CALL_S for peers that joined to say ready or failed; '' when nobody is missing.
        silent_out gets the ranks that joined and never answered."""
        store = self.store
        if store is None:
            return ""
        others = [r for r in range(self.world_size) if r != self.rank]
        never = [r for r in others if not store.check([_joined_key(r)])]
        silent = [r for r in others if r not in never]
        limit = time.monotonic() + ROLL_CALL_S
        while silent:
            silent = [r for r in silent if not store.check([_ready_key(r)]) and not store.check([_failed_key(r)])]
            if not silent or time.monotonic() >= limit:
                break
            time.sleep(JOIN_POLL_S)
        silent_out.extend(silent)
        said = []
        if never:
            said.append(never_joined(never, self.world_size))
        if silent:
            said.append(f"{', '.join(self._described(r) for r in silent)} joined but never finished setting up")
        stalled, died = [], []
        for rank in others:
            if rank in never or rank in silent:
                continue
            if store.check([_failed_key(rank)]):
                index, own, reason = store.get(_failed_key(rank)).decode(errors="replace").split("|", 2)
                if own == "1" and int(index) < self._step_index:  # stuck before the step this rank waits in
                    stalled.append(f"{self._described(rank)} stalled: {reason}")
            elif self.ready_done and (described := self._described(rank)).endswith(": died)"):
                died.append(described)  # ready, then gone without a word (seen on this host only)
        if died:
            said.append(f"{', '.join(died)} died while setting up")
        return "; ".join(said + stalled)

    def _described(self, rank: int) -> str:
        """'rank 3 (node004, pid 1234: died)': the host it registered from; on this host, its fate."""
        host, pid = self.store.get(_joined_key(rank)).decode(errors="replace").rsplit(" ", 1)
        state = roll_call.process_state(int(pid)) if host == hostname() and pid.isdigit() else "?"
        fate = ": died" if state in (None, "Z") else ": stopped" if state == "T" else ""
        return f"rank {rank} ({host}, pid {pid}{fate})"

    def _linger(self, silent: int) -> None:
        """The store's host waits (up to LINGER_S) until every peer that joined and answered has read
        its roll call."""
        limit = time.monotonic() + LINGER_S
        with contextlib.suppress(Exception):
            expected = int(self.store.add(JOINED_COUNT, 0)) - silent
            while int(self.store.add(REPORTED_COUNT, 0)) < expected and time.monotonic() < limit:
                time.sleep(JOIN_POLL_S)


def rendezvous_store(launch: LaunchEnv, timeout: _dt.timedelta) -> tuple[Any, bool]:
    """The store init_process_group's env:// would make (rank 0 holds it, or torch's agent does), and
    whether this process holds it; made here so that the ranks register in it before the group,
    without TCPStore's own wait for every client in its constructor (wait_for_workers, where rank 0
    would sit in native code), so that the join's wait names who never came. A restarted elastic
    attempt gets keys of its own (run_owner.rendezvous)."""
    import torch.distributed as tdist

    given = run_owner.rendezvous(os.environ, launch.world_size, timeout)
    if "store" in given:
        return given["store"], False
    hosts_store = launch.rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    store = tdist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), launch.world_size,
                           is_master=hosts_store, timeout=timeout, wait_for_workers=False, multi_tenant=hosts_store)
    return tdist.PrefixStore(DEFAULT_PG_PREFIX, store), hosts_store


def named_ranks(ranks: list[int]) -> str:
    """"rank 4" or "ranks 1, 4", as a set-up failure's line names them (the process group's and the star's)."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def never_joined(never: list[int], world_size: int) -> str:
    """The part of a set-up failure's line that names the ranks that never joined, and how many did."""
    return f"{named_ranks(never)} never joined ({world_size - len(never)} of {world_size} did)"
