"""Shared helpers: run the real CLI under torch's own launcher (torchrun), gloo on CPU; real Slurm and
Open MPI on simulated hosts (the `slurm` and `mpi` fixtures, tests/simslurm.py and tests/simmpi.py)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forked_cli import run_forked

REPO = Path(__file__).resolve().parents[1]


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    # A suite run inside a launcher (an srun step, mpirun) must not hand its layout to the tool.
    launcher_vars = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                     "TORCHELASTIC_RUN_ID")
    for name in list(env):
        if name in launcher_vars or name.startswith(("SLURM_", "OMPI_COMM_WORLD_")):
            env.pop(name)
    env.update(extra or {})
    return env


def run_torchrun(nproc: int, args: list[str], *, env: dict[str, str] | None = None, timeout: float = 180,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node N -m nccl_bench ARGS`; --standalone picks a free port.
    torchrun's own process is forked from one that has imported torch (tests/forked_cli.py)."""
    argv = ["--standalone", "--nproc_per_node", str(nproc), "-m", "nccl_bench", *args]
    return run_forked(argv, module="torch.distributed.run", cwd=cwd or REPO, env=worker_env(env), timeout=timeout)


def run_cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 180,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m nccl_bench ARGS` as a user would type it (no launcher), its process forked from one
    that has imported torch (tests/forked_cli.py); tests that signal or watch the process start it
    themselves."""
    return run_forked(args, cwd=cwd or REPO, env=worker_env(env), timeout=timeout)


@pytest.fixture(scope="session", autouse=True)
def _session_history_store(tmp_path_factory):
    """Every run a test starts records itself into a store of the session's, never into the checkout's results/."""
    os.environ["NCCL_BENCH_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite")


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server of the session's (tests/history_stores.py), or the reason it cannot run here.
    Its folder is a fresh one under /tmp: pytest's own are closed to the `postgres` user."""
    import shutil
    import tempfile

    from tests.history_stores import PostgresServer, why_no_postgres

    why = why_no_postgres()
    if why is not None:
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="nccl-bench-pg-"))
    server = PostgresServer(folder)
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A new, empty history of each kind: an SQLite file, a fresh database on the PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("postgres_server").new_database()


@pytest.fixture
def torchrun():
    return run_torchrun


@pytest.fixture
def cli():
    return run_cli


# One real two-rank sweep that several modules only read (tables, reports, plots, exports): run once.
SHARED_SWEEP = ["sweep", "--workers", "2", "--op", "all_reduce,all_gather", "--sizes", "1K,64K,2M", "--iters", "3",
                "-w", "1", "--peak", "20"]


@pytest.fixture(scope="session")
def shared_sweep(tmp_path_factory) -> tuple[Path, str]:
    """(run folder, what the sweep printed with its stdout piped at COLUMNS=80) of SHARED_SWEEP.
    Tests must not change the folder: copy it first."""
    run_dir = tmp_path_factory.mktemp("shared") / "run"
    done = run_cli([*SHARED_SWEEP, "--out", str(run_dir)], env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr[-2000:]
    return run_dir, done.stdout


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (a launcher's workers)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def rank_of(pid: int) -> int | None:
    """The RANK a worker process was started with, from its environment."""
    try:
        for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if entry.startswith(b"RANK="):
                return int(entry[5:])
    except OSError:
        return None
    return None


_layouts = itertools.count(1)


def layout_tag() -> str:
    """A tag for simulated hosts' namespace names that no other layout alive in this machine uses:
    the pid (as test_doctor_hosts.py uses it) plus one digit counting this process's layouts, past any
    whose namespace exists. The count alone is not enough: this file is imported twice in one process
    (as pytest's `conftest` and as `tests.conftest`), each copy counting from 1, so a module's cluster and
    a test's own cluster once both took the same names ("ip netns add ...: File exists")."""
    for _ in range(10):
        tag = f"{os.getpid() % 10000:04d}{next(_layouts) % 10}"
        if not Path(f"/run/netns/nbsw{tag}").exists():  # simhosts' switch namespace
            break
    return tag


def _started(why_not, opened):
    """Generator for a fixture: what `opened()` yields, or the exact reason to skip (the tools missing,
    or hosts that cannot be built here); everything torn down afterwards, failed test or not."""
    from simhosts import SetupError

    reason = why_not()
    if reason:
        pytest.skip(reason)
    try:
        with opened() as made:
            yield made
    except SetupError as exc:
        pytest.skip(f"cannot build simulated hosts here: {exc}")


def start_slurm(tmp_path_factory, count: int, **kwargs):
    """A real Slurm cluster (simslurm.slurm_cluster's keywords): every daemon killed and every
    namespace deleted afterwards."""
    from simslurm import slurm_cluster, why_no_slurm

    yield from _started(why_no_slurm, lambda: slurm_cluster(count, tmp_path_factory.mktemp("slurm"), layout_tag(),
                                                            **kwargs))


def start_mpi(tmp_path_factory, count: int, **kwargs):
    """Simulated hosts ready for a real mpirun (simmpi.mpi_hosts): every process in them killed and the
    namespaces deleted afterwards."""
    from simmpi import mpi_hosts, why_no_mpi

    yield from _started(why_no_mpi, lambda: mpi_hosts(count, tmp_path_factory.mktemp("mpi"), layout_tag(), **kwargs))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real Slurm cluster (simslurm.SlurmCluster) on four simulated hosts node01..node04: slurmctld
    and munged on node01, slurmd on node01-node03, all idle; node04 is in slurm.conf but its slurmd
    is never started (sinfo: `unk`, then `unk*`). Two pretend GPUs per node (gres/gpu), KillWait=5.
    Shared by a module's tests: each test should leave no job behind."""
    yield from start_slurm(tmp_path_factory, 4, started=(0, 1, 2), gpus=2, kill_wait=5)


@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    """Three simulated hosts node01..node03 for a real `mpirun` (simmpi.MpiHosts): `mpi.mpirun(ARGS)`
    runs `mpirun <agent and TCP options> ARGS` on node01. Shared by a module's tests."""
    yield from start_mpi(tmp_path_factory, 3)


# The stop-signal handlers the test process started with: a test whose run ends while signals are
# held keeps nccl_bench's handler installed (by design: the rank's last line comes first), which must
# not reach the tests after it.
_HANDLERS_AT_START = {signum: signal.getsignal(signum)
                      for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}


@pytest.fixture(autouse=True)
def stop_signals_as_at_start():
    yield
    for signum, handler in _HANDLERS_AT_START.items():
        signal.signal(signum, handler)
    faults = sys.modules.get("nccl_bench.ranks.faults")
    if faults is not None:  # nccl_bench's signal state back to rest
        faults._signals.held, faults._signals.pending, faults._signals.on_unanswered = False, None, None


# -- parallel groups and the tests that run alone (scripts/dev.sh test) ---------------------------------
# dev.sh runs the suite in two passes. The first spreads every test over pytest-xdist workers
# (--dist loadgroup); the tests of one group run one after another on one worker. The second runs
# the tests marked `alone` by themselves, after the rest.
# Groups are of two kinds: what a module declares with `pytest.mark.xdist_group("timing")` (a deadline,
# a signal or a timeout measured in seconds: one at a time, so two stalls never share the cores'
# slack), and what follows from the fixtures a test uses, derived here: a daemon a worker starts once
# for its session (PostgreSQL), a cluster a module starts (Slurm, Open MPI) or a run that several
# modules read (shared_sweep) is made on one worker only.
# `pytest.mark.alone` is for a module that measures bandwidth through tc-shaped links between
# simulated hosts: gloo over a veth pair is bound by the CPU where the link is not shaped, so the
# load of a parallel neighbour moves the very ratios those tests judge.
FIXTURE_GROUPS = {"postgres_server": "postgresql", "slurm": "slurm", "mpi": "mpi", "shared_sweep": "shared-sweep"}


def fixture_group(item: pytest.Item) -> str | None:
    """The group a test's fixtures put it in, or None; `store_url` needs the server only as postgresql."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("store_url") == "postgresql":
        return FIXTURE_GROUPS["postgres_server"]
    return next((group for name, group in FIXTURE_GROUPS.items() if name in item.fixturenames), None)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
