"""The process group (made and destroyed in one place, aborted from any thread) and cross-rank helpers.

Launcher layouts are in ranks/layout.py, backend and device choice in ranks/devices.py, and the
store notes that name a failed rank in ranks/roll_call.py.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from nccl_bench.ranks import devices
from nccl_bench.ranks.devices import device_kind, nccl_env_to_set, passes_device_id
from nccl_bench.ranks.layout import LaunchEnv, export_launch_env
from nccl_bench.ranks.native_output import HeldOutput, backend_diagnostics, backend_error_text
from nccl_bench.ranks.split import brief_ranks_text
from nccl_bench.results.nccl_diag import report_lines

# NCCL's own watchdog gets this much longer than the rank's deadline (ranks/deadline.py), so that the
# deadline always acts first and the watchdog never starts its pre-abort sleep under it.
NCCL_WATCHDOG_LAG_S = 10.0
# How long an unclean exit waits for its abort before it goes on to report: ncclCommAbort returns
# at once, or it does not return at all.
ABORT_WAIT_S = 5.0


class ObjectExchange(Protocol):
    """The ranks' exchange without a process group (ranks/star_gather.StarGather): every rank's object, in
    rank order; `what` names the part a rank never sent."""

    def all_gather(self, obj: Any, what: str) -> list[Any]:
        ...

    def close(self) -> None:
        ...


class SetUpWatch(Protocol):
    """What the process group and its sub-groups need of the rank's set-up watch: a deadline on each
    step from the rendezvous to the group's destruction, and the roll call's line when one fails.
    ranks/set_up.SetUp is the one there is; it imports this module, so dist names it by what it does."""

    def start(self, rank: int, world_size: int, timeout_s: float, release_output: Callable[[], None]) -> None:
        """The first step starts now; release_output gives the terminal back before the watchdog reports."""

    def join_store(self, launch: LaunchEnv, timeout_s: float, group_timeout_s: float, held: Any) -> Any:
        """The rendezvous store, once every rank has registered in it."""

    def step(self, where: str) -> None:
        """A step starts, named `where` in a failure's line: it has --timeout from now (no-op once set-up is over)."""

    def ready(self, notes_store: Any) -> None:
        """This rank's process group exists; the roll call's notes live in notes_store from now on."""

    def hold_native_warnings(self) -> None:
        """The process group exists: stderr is held until set-up is over (torch's warnings of failed waits)."""

    def drop_native_warnings(self) -> None:
        """The set-up failed and the group is gone: what stderr held is dropped (no-op once passed on)."""

    def start_failed(self, cause: str, timeout_s: float) -> Exception:
        """The failure to raise when the process group could not start, naming who is missing."""

    def close(self) -> None:
        """The main thread is back: no watchdog."""

    def tear_down(self) -> None:
        """The process group is destroyed next: a step of its own."""


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: Any  # torch.device
    group_timeout_s: float | None = None  # the default group's timeout; subgroups get the same

    def group_timeout(self):
        """The default group's timeout as new_group takes it (None: torch's default)."""
        return None if self.group_timeout_s is None else _dt.timedelta(seconds=self.group_timeout_s)
    group: Any = None  # the process group the helpers below work in; None: the whole world
    # A gloo group over the same ranks for the helpers' own exchanges (None: `group` itself). With
    # --nccl-env a variant may leave NCCL no algorithm for them (since 2.24 NCCL_ALGO=Tree fails every
    # all_gather), and the run's bookkeeping must not be what fails.
    control: Any = None
    # The launcher's store, held from the start: aborting every group (abort_all_groups) forgets the
    # default group, and with it the lookup of its store, which the roll call after a stall needs.
    store: Any = None
    # NCCL: TORCH_NCCL_ASYNC_ERROR_HANDLING's value, who chose it and why (devices.error_handling; meta.json)
    error_handling: dict | None = None
    # The rank's set-up watch: each sub-group made during set-up is a step of its own (make_groups).
    set_up: SetUpWatch | None = None
    # What NCCL printed of its diagnostics report (NCCL_RUN_DIAGNOSTICS, NCCL_RUN_RAS_DIAGNOSTICS: NCCL >= 2.31)
    # while the process group started: the world communicator's report, on its rank 0 (results/nccl_diag.py).
    nccl_diag_lines: tuple[str, ...] = ()
    # Without a process group (a run that measures nothing, ranks/star_gather.py): the ranks' exchange
    # over rank 0's socket, which gather_objects and max_across_ranks use instead of torch.
    star: ObjectExchange | None = None

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"


class BackendStartError(RuntimeError):
    """The process group could not start; `details` holds what the backend said (backend_diagnostics)."""

    def __init__(self, message: str, details: tuple[str, ...]):
        super().__init__(message)
        self.details = details


class _Aborted:
    done = False  # the process group was aborted: destroying it would wait on what the abort cut short


_aborted = _Aborted()


# gloo connects a pair of ranks when the pair first exchanges data, not every pair when the group is
# made (torch's TORCH_GLOO_LAZY_INIT, read by ProcessGroupGloo::Options::create_default in torch 2.13):
# the doctor's rounds use one partner at a time, and a collective a few neighbours, where a full mesh
# opens N-1 connections per rank at once (64 x 63 on one host at 64 simulated hosts). A value the user
# set is kept.
GLOO_LAZY_ENV = "TORCH_GLOO_LAZY_INIT"
# torch's own name for the default group's prefix in the rendezvous store (init_process_group wraps the
# store it makes in PrefixStore("default_pg", ...)); kept, so keys land where they always did.
DEFAULT_PG_PREFIX = "default_pg"


@contextlib.contextmanager
def process_group(launch: LaunchEnv, backend: str, timeout_s: float, device_index: int | None = None,
                  control: bool = False, *, set_up: SetUpWatch) -> Iterator[DistContext]:
    """The one place a process group is created and destroyed (also on error or interrupt).

    control: also make a gloo group for the helpers' own exchanges (DistContext.control).
    set_up: the rank's set-up watch (ranks/set_up.SetUp): every step from the rendezvous to the
    destruction of the group ends within --timeout of its last progress, or the rank is ended."""
    import torch
    import torch.distributed as dist

    from nccl_bench.ranks import deadline, planted
    export_launch_env(launch)
    extra = {}
    group_timeout_s = timeout_s
    handling = None
    if device_kind(backend) == "cuda":
        device = torch.device("cuda", launch.local_rank if device_index is None else device_index)
        torch.cuda.set_device(device)
        if passes_device_id(torch.__version__):
            extra["device_id"] = device
        agent = devices.agent_environ(os.environ)
        handling = devices.error_handling(os.environ, agent)  # who chose it, before it is set
        os.environ.update(nccl_env_to_set(os.environ, agent))
        group_timeout_s = timeout_s + deadline.MARGIN_S + deadline.GRACE_S + NCCL_WATCHDOG_LAG_S
    else:
        device = torch.device("cpu")
        os.environ.setdefault(GLOO_LAZY_ENV, "1")
        late = planted.late_backend_s(os.environ)
        if late is not None:  # a test puts gloo's timeout after the deadline, as NCCL's is
            group_timeout_s = timeout_s + deadline.MARGIN_S + late
    group_timeout = _dt.timedelta(seconds=group_timeout_s)
    _aborted.done = False
    held = HeldOutput()
    set_up.start(launch.rank, launch.world_size, timeout_s, held.release)
    try:
        store = set_up.join_store(launch, timeout_s, group_timeout_s, held)
        set_up.step("making the process group")
        try:
            with held:
                dist.init_process_group(backend=backend, rank=launch.rank, world_size=launch.world_size,
                                        timeout=group_timeout, store=store, **extra)
        except RuntimeError as exc:  # NCCL failing to start (device_id); gloo's store waits and connects
            set_up.close()
            details = backend_diagnostics(held.text + "\n" + str(exc))
            if device_kind(backend) == "cuda" or details:  # what the backend said is the news
                raise BackendStartError(str(exc), details) from exc
            failure = set_up.start_failed(backend_error_text(exc), timeout_s)
            failure.details = details
            raise failure from None
        diag_lines = tuple(report_lines(held.text))  # NCCL's diagnostics report, if it printed one
        held.text = ""  # the rest (a long NCCL_DEBUG=INFO log) is not kept for the run
        set_up.hold_native_warnings()
        # The roll call's notes (ranks/roll_call.py) live where they always have: in the default group's store.
        notes_store = dist.distributed_c10d._get_default_store()
        set_up.ready(notes_store)
        set_up.step("making the side group")
        # made on gloo too, so that the path every --nccl-env run takes is the one the CPU tests run
        side = dist.new_group(backend="gloo", timeout=group_timeout) if control else None
    except BaseException:
        set_up.close()
        set_up.drop_native_warnings()
        raise
    clean = False
    try:
        yield DistContext(launch.rank, launch.world_size, launch.local_rank, backend, device, group_timeout_s,
                          control=side, store=notes_store, set_up=set_up, error_handling=handling,
                          nccl_diag_lines=diag_lines)
        clean = True
    finally:
        set_up.tear_down()
        try:
            if _aborted.done:  # after an abort, shutdown would flush and join what the abort cut short
                pass
            elif clean:
                with contextlib.suppress(Exception):
                    dist.destroy_process_group()
            else:
                abort_within(ABORT_WAIT_S)
        finally:
            set_up.close()
            set_up.drop_native_warnings()


def abort_within(seconds: float) -> None:
    """Abort every group on an unclean exit (an error, an interrupt, a parent gone, a failure seen on
    the gloo side group), waiting at most `seconds` for it.

    Never destroy there: ProcessGroupNCCL's shutdown finalizes each communicator (ncclCommFinalize,
    then commDestroySync), which synchronizes the device stream and so waits for kernels whose peers,
    stopped at other op counts, never launch theirs; with a CUDA graph it also waits until every graph
    that uses the communicator is gone, which the exception in flight keeps alive. The one-line report
    is printed after this context exits, so a teardown that waits would lose it (torchrun SIGKILLs 30 s
    after its SIGTERM; a direct launch would never end). The abort runs on a thread of its own, so
    even an abort that hangs cannot hold the report back."""
    import threading

    worker = threading.Thread(target=_abort_quietly, name="nccl-bench-abort-at-exit", daemon=True)
    worker.start()
    worker.join(seconds)


def _abort_quietly() -> None:
    with contextlib.suppress(Exception):
        abort_all_groups()


def abort_all_groups() -> None:
    """Abort every process group of this rank (the world and each --split or doctor sub-group), from
    any thread.

    A sub-group has communicators of its own: ProcessGroupNCCL::abort aborts only its group's
    (abortComms in torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), so aborting the default group
    alone leaves a rank waiting in a stalled sub-group where it is. distributed_c10d._abort_process_group
    with no group (experimental; older than ProcessGroup.abort, read here in torch 2.13) aborts every
    group, newest first, inside one NCCL group call so that the aborts do not wait on each other, and
    then forgets them all. Where it is missing or fails, each group left is aborted in turn
    (ProcessGroup.abort). gloo's abort does nothing; its own timeout ends its ops.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    _aborted.done = True
    c10d = dist.distributed_c10d
    whole = getattr(c10d, "_abort_process_group", None)
    if whole is not None:
        try:
            whole()
            return
        except Exception:  # an abort that fails on one backend must not spare the other groups
            pass
    for group in sorted(c10d._world.pg_names, key=lambda g: c10d._world.pg_names[g], reverse=True):
        if callable(getattr(group, "abort", None)):
            group.abort()


def waited_text(timeout_s: float, group_timeout_s: float) -> str:
    """How long the rendezvous waited: --timeout, or (NCCL) the longer time its group is given."""
    if group_timeout_s == timeout_s:
        return f"within --timeout {timeout_s:g} s"
    return (f"within {group_timeout_s:g} s (--timeout {timeout_s:g} s + {group_timeout_s - timeout_s:g} s "
            "that NCCL's group is given so the rank's deadline acts first)")


def make_groups(ctx: DistContext, members: list[tuple[int, ...]]) -> dict[tuple[int, ...], DistContext]:
    """Every group of `members` (global ranks, in rank order) made once, by every rank, in the order
    given; this rank's own groups as contexts, by their ranks.

    Every rank creates every group, those it is not in too: NCCL splits a group from the world
    communicator, which all ranks must enter (torch's new_group docs), so a group made by its members
    alone would hang. Each group has the default group's timeout, and a gloo side group where the world
    has one. Within a group's context, rank and world_size are the group's and the helpers below stay
    in it. During set-up each group is a step of its own, named with its ranks, so that a stall names
    the group it stalled in.
    """
    import dataclasses

    import torch.distributed as dist

    groups = list(dict.fromkeys(members))  # a group named twice is made once
    mine = {}
    for index, ranks in enumerate(groups):
        if ctx.set_up is not None:  # a no-op once set-up is over (the doctor makes its groups while measuring)
            ctx.set_up.step(group_step(index, len(groups), ranks))
        handle = dist.new_group(list(ranks), timeout=ctx.group_timeout())
        side = None if ctx.control is None else dist.new_group(list(ranks), timeout=ctx.group_timeout(),
                                                                backend="gloo")
        if ctx.rank in ranks:
            mine[ranks] = dataclasses.replace(ctx, rank=ranks.index(ctx.rank), world_size=len(ranks), group=handle,
                                              control=side)
    return mine


def group_step(index: int, count: int, ranks: tuple[int, ...]) -> str:
    """'making sub-group 2 of 8 (ranks 1,9)': the set-up step of the group at `index` (from 0)."""
    return f"making sub-group {index + 1} of {count} (ranks {brief_ranks_text(ranks)})"


def _exchange(ctx: DistContext):
    """The group and device of the helpers' own exchanges: the gloo side group where there is one."""
    import torch

    return (ctx.group, ctx.device) if ctx.control is None else (ctx.control, torch.device("cpu"))


def all_gather_floats(ctx: DistContext, values: list[float]) -> list[list[float]]:
    """Every rank's list of floats (all lists the same length), on every rank."""
    import torch
    import torch.distributed as dist

    group, device = _exchange(ctx)
    local = torch.tensor(values, dtype=torch.float64, device=device)
    gathered = [torch.empty_like(local) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, local, group=group)
    return [t.tolist() for t in gathered]


def max_across_ranks(ctx: DistContext, values: list[float]) -> list[float]:
    """Element-wise maximum over ranks (used for per-op latencies and agreeing on a count)."""
    if ctx.star is not None:
        return [max(column) for column in zip(*ctx.star.all_gather(values, "set-up times"), strict=True)]
    import torch
    import torch.distributed as dist

    group, device = _exchange(ctx)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
    return tensor.tolist()


def sum_across_ranks(ctx: DistContext, value: int) -> int:
    import torch
    import torch.distributed as dist

    group, device = _exchange(ctx)
    tensor = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return int(tensor.item())


def gather_objects(ctx: DistContext, obj: Any, what: str = "its part") -> list[Any]:
    """Every rank's obj, in rank order. what: named when a rank never sends it (ctx.star only)."""
    if ctx.star is not None:
        return ctx.star.all_gather(obj, what)
    import torch.distributed as dist

    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj, group=_exchange(ctx)[0])
    return out


def synchronize(ctx: DistContext) -> None:
    """Wait for the GPU work queued so far (a no-op on CPU, where ops complete before returning)."""
    if ctx.on_gpu:
        import torch

        torch.cuda.synchronize()


def barrier(ctx: DistContext) -> None:
    """Every rank here before the next step. With a gloo side group (--nccl-env) the GPU is drained and
    the side group waits: torch's NCCL barrier is an all_reduce of one element, which a variant that
    leaves all_reduce no algorithm (NCCL_ALGO=PAT, NVLS where there is none) would fail at every sample."""
    import torch.distributed as dist

    if ctx.control is not None:
        synchronize(ctx)
        dist.barrier(group=ctx.control)
    elif ctx.on_gpu:
        dist.barrier(group=ctx.group, device_ids=[ctx.device.index])
    else:
        dist.barrier(group=ctx.group)


def hostname() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class Machine:
    """Where a rank runs, beyond its hostname, which cloned images and containers given one `--hostname`
    share: the kernel's boot id and the network namespace tell machines (and containers) apart; the
    address the rank reaches MASTER_ADDR from names it for people."""

    identity: str
    address: str


def this_machine(environ) -> Machine:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
        namespace = os.stat("/proc/self/ns/net").st_ino
    except OSError:  # not Linux, or /proc not mounted: the hostname is all there is to go by
        return Machine("", "?")
    return Machine(f"{boot}/{namespace}", _outgoing_address(environ.get("MASTER_ADDR", ""),
                                                             environ.get("MASTER_PORT", "29500")))


def _outgoing_address(host: str, port: str) -> str:
    """The local address a packet to host would leave from (a UDP connect sends nothing), or '?'."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(host or "127.0.0.1", int(port), type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.connect(where)
            return str(probe.getsockname()[0])
    except (OSError, ValueError):
        return "?"


def shared_hostname(hostnames: list[str], machines: list[Machine]) -> str | None:
    """The first hostname that ranks on different machines share, said with each machine's ranks and
    address; None when every name is one machine. Ranks are grouped by hostname into nodes (intra-node
    phases, --split node, the node count), so such a run would measure the network as a node's links."""
    for name in dict.fromkeys(hostnames):
        ranks_of: dict[str, list[int]] = {}
        for rank, (host, machine) in enumerate(zip(hostnames, machines, strict=True)):
            if host == name and machine.identity:
                ranks_of.setdefault(machine.identity, []).append(rank)
        if len(ranks_of) > 1:
            places = "; ".join(f"rank(s) {','.join(map(str, ranks))} at {machines[ranks[0]].address}"
                               for ranks in ranks_of.values())
            return (f"{name} names {len(ranks_of)} different machines ({places}): cloned images or containers "
                    "given one hostname? Ranks are told apart by hostname; give each machine its own")
    return None
