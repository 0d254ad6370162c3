"""The suite's fixtures and hooks, and nothing else: what they are built on is in tests/helpers/ (the real CLI
and torchrun in launch.py; real Slurm and Open MPI on simulated hosts in simslurm.py and simmpi.py)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.helpers.groups import mark_groups, skipped_by_alone_pass
from tests.helpers.launch import SHARED_SWEEP, run_cli, run_torchrun
from tests.helpers.simmpi import start_mpi
from tests.helpers.simslurm import start_slurm


@pytest.fixture(scope="session", autouse=True)
def _session_history_store(tmp_path_factory):
    """Every run a test starts records itself into a store of the session's, never into the checkout's results/."""
    os.environ["NCCL_BENCH_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite")


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server of the session's (tests/helpers/history_stores.py), or the reason it cannot run here.
    Its folder is a fresh one under /tmp: pytest's own are closed to the `postgres` user."""
    import shutil
    import tempfile

    from tests.helpers.history_stores import PostgresServer, why_no_postgres

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


@pytest.fixture(scope="session")
def shared_sweep(tmp_path_factory) -> tuple[Path, str]:
    """(run folder, what the sweep printed with its stdout piped at COLUMNS=80) of launch.SHARED_SWEEP.
    Tests must not change the folder: copy it first."""
    run_dir = tmp_path_factory.mktemp("shared") / "run"
    done = run_cli([*SHARED_SWEEP, "--out", str(run_dir)], env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr[-2000:]
    return run_dir, done.stdout


@pytest.fixture(scope="module")
def slurm_of_module(tmp_path_factory):
    """The Slurm cluster a module's tests share (started once per module; tests take it through `slurm`)."""
    yield from start_slurm(tmp_path_factory, 4, started=(0, 1, 2), gpus=2, kill_wait=5)


@pytest.fixture
def slurm(slurm_of_module):
    """A real Slurm cluster (simslurm.SlurmCluster) on four simulated hosts node01..node04: slurmctld
    and munged on node01, slurmd on node01-node03, all idle; node04 is in slurm.conf but its slurmd
    is never started (sinfo: `unk`, then `unk*`). Two pretend GPUs per node (gres/gpu), KillWait=5.
    Shared by a module's tests: each test should leave no job behind. Given to a test only once
    node01-node03 are idle: a node that ran the last test's job stays `comp` (completing) until its
    epilog ends, and a job placed meanwhile lands on other nodes than the test names."""
    slurm_of_module.wait_nodes(slurm_of_module.started, ("idle",))
    return slurm_of_module


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
# Groups are of two kinds: what a test declares with `pytest.mark.xdist_group(...)`, "timing" (a deadline
# or a wait measured in seconds) or "signals" (a signal sent to a run, its ending watched): one at a
# time within each, so two stalls or two dying runs never share the cores' slack; and what follows
# from the fixtures a test uses, derived here: a daemon a worker starts once
# for its session (PostgreSQL), a cluster a module starts (Slurm, Open MPI) or a run that several
# modules read (shared_sweep) is made on one worker only.
# `pytest.mark.alone` is for a test that judges bandwidth through tc-shaped links between simulated
# hosts where the CPUs, not the links, set the healthy side (the doctor's ratios), or whose verdict rests
# on a run-to-run spread of a few percent (the history's rule): the load of a parallel neighbour moves
# what they judge. A test that compares groups through links all limited (Hosts.limit_nics) runs in the
# first pass: the fast side is held near the limit, so a factor between the sides survives the load.
@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config, items):
    mark_groups(items)


def pytest_ignore_collect(collection_path, config):
    """The `alone` pass (`-m alone`) imports only the test modules that mark a test alone: collecting the
    whole suite to select a handful cost 13-17 s of the pass (its modules import torch, pandas, ...)."""
    return skipped_by_alone_pass(collection_path, config.getoption("markexpr"))
