"""A set-up that cannot finish ends every rank within --timeout + set_up.ENDS_WITHIN_S, naming who is
missing: real gloo ranks of `doctor` with Open MPI's layout variables on this host.

Five ranks where rank 4 is never started and rank 1 is killed once it has registered in the
rendezvous store: each rank left says, in its one line, that rank 4 never joined and that rank 1
joined and died. Four ranks where rank 2 blocks in native code after registering (a wait no abort
reaches): its own watchdog ends it, and every other rank names it. One rank blocked there that gets a
SIGTERM ends within seconds, with its line. The bound is counted from the moment the last rank joined
(read from the store, as a peer would), so a slow start on a loaded machine does not count against it.
"""

from __future__ import annotations

import datetime as _dt
import signal
import socket
import subprocess
import sys
import time

import pytest

from nccl_bench.errors import EXIT_INTERRUPTED
from nccl_bench.ranks import faults, planted, set_up
from nccl_bench.ranks.dist import DEFAULT_PG_PREFIX
from tests.helpers.launch import REPO, worker_env
from tests.helpers.ports import free_port
from tests.helpers.processes import ended_by

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("timing")]

TIMEOUT_S = 10.0
# After the bound the ranks promise: a process's own exit (torch's teardown, a loaded machine's
# scheduling) and the poll of this test.
EXIT_SLACK_S = 20.0
START_LIMIT_S = 180.0  # for every launched rank to register, however loaded the machine
# Far past the signal's bound: a rank that only its set-up deadline ended would fail the test.
LONG_TIMEOUT_S = 120.0


def _launch(world: int, ranks: list[int], port: int, fault: str, tmp_path,
            timeout_s: float = TIMEOUT_S) -> dict[int, subprocess.Popen]:
    procs = {}
    for rank in ranks:
        env = worker_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMPI_COMM_WORLD_RANK": str(rank),
                          "OMPI_COMM_WORLD_SIZE": str(world), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
                          "OMPI_COMM_WORLD_LOCAL_SIZE": str(world), "NCCL_BENCH_FAULT": fault})
        argv = [sys.executable, "-m", "nccl_bench", "doctor", "--no-plot",
                "--size", "64K", "--timeout", f"{timeout_s:g}",
                "--no-history", "--out", str(tmp_path / "run")]
        with open(tmp_path / f"rank{rank}.err", "w") as err:  # a file: a full pipe would hold the rank
            procs[rank] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env,
                                           cwd=REPO, start_new_session=True)
    return procs


def _all_joined_at(port: int, expected: int, procs: dict[int, subprocess.Popen]) -> float:
    """When the store's joined count reached `expected`, read as the ranks read it."""
    return _when(port, procs, lambda store: int(store.add(f"{DEFAULT_PG_PREFIX}/{set_up.JOINED_COUNT}", 0)) >= expected,
                 "the ranks never all joined")


def _when(port: int, procs: dict[int, subprocess.Popen], seen, what: str) -> float:
    """When seen(store) first held, polling the ranks' rendezvous store (unprefixed) from outside."""
    import torch.distributed as tdist

    limit = time.monotonic() + START_LIMIT_S
    store = None
    while time.monotonic() < limit and any(p.poll() is None for p in procs.values()):
        try:
            store = store or tdist.TCPStore("127.0.0.1", port, None, is_master=False,
                                            timeout=_dt.timedelta(seconds=5), wait_for_workers=False)
            if seen(store):
                return time.monotonic()
        except (RuntimeError, ValueError):  # the store is not up yet
            store = None
        time.sleep(0.1)
    raise AssertionError(f"{what}: exit codes {[p.poll() for p in procs.values()]}")


def _ended(procs: dict[int, subprocess.Popen], by: float, tmp_path,
           bound: str = f"--timeout + {set_up.ENDS_WITHIN_S:g} s") -> dict[int, tuple[int | None, str]]:
    """Each rank's exit code and stderr; a rank still running at `by` is killed and fails the test."""
    late = ended_by(procs, by)
    said = {rank: (proc.returncode, (tmp_path / f"rank{rank}.err").read_text()) for rank, proc in procs.items()}
    assert not late, f"ranks {late} outlived {bound}: {said}"
    return said


def _run(world: int, ranks: list[int], fault: str, tmp_path):
    """Launch `ranks` of a world of `world` with the planted fault; (each rank's exit code and stderr,
    the processes), every rank having ended within the bound counted from the last join."""
    port = free_port()
    procs = _launch(world, ranks, port, fault, tmp_path)
    try:
        joined = _all_joined_at(port, len(ranks), procs)
        return _ended(procs, joined + TIMEOUT_S + set_up.ENDS_WITHIN_S + EXIT_SLACK_S, tmp_path), procs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("nccl-bench: error:")]


def test_a_rank_that_never_joins_and_one_that_dies_in_set_up_are_named_by_every_other_rank(tmp_path):
    said, procs = _run(5, list(range(4)), "crash-set-up:1", tmp_path)
    assert said[1][0] == -9  # the planted crash
    for rank in (0, 2, 3):
        code, err = said[rank]
        lines = _error_lines(err)
        assert code == 3 and len(lines) == 1, (rank, err)
        assert "setting up the doctor failed: rank 4 never joined (4 of 5 did)" in lines[0], lines
        assert f"rank 1 ({socket.gethostname()}, pid {procs[1].pid}: died) joined but never finished" in lines[0]
        assert f"rank {rank} saw: joining the rendezvous made no progress" in lines[0]
        assert "Traceback" not in err


def test_a_rank_stuck_in_set_up_is_ended_by_its_own_deadline_and_named_by_every_other_rank(tmp_path):
    said, procs = _run(4, list(range(4)), "stall-set-up:2", tmp_path)
    assert {rank: code for rank, (code, _) in said.items()} == {0: 3, 1: 3, 2: 3, 3: 3}, said
    own = _error_lines(said[2][1])
    assert len(own) == 1 and "rank 2 saw: joining the rendezvous made no progress for more than" in own[0], said[2]
    # The others made their process groups (gloo connects lazily) and fail in the first exchange,
    # still in set-up: each says the set-up's line, naming rank 2 with the host it registered from.
    for rank in (0, 1, 3):
        lines = _error_lines(said[rank][1])
        assert len(lines) == 1 and lines[0].startswith("nccl-bench: error: setting up the doctor failed: "), said[rank]
        assert f"rank 2 ({socket.gethostname()}, pid {procs[2].pid}" in lines[0], lines
        assert f"rank {rank} saw: " in lines[0] and "Traceback" not in said[rank][1], said[rank]


def test_a_stop_signal_ends_a_rank_blocked_in_native_code_during_set_up_within_seconds(tmp_path):
    """The main thread sits in a C++ store wait, where Python never runs the signal's handler: the
    signal's own thread ends the rank UNANSWERED_SIGNAL_S later with its line, long before the set-up
    deadline (--timeout + its grace) would."""
    port = free_port()
    procs = _launch(2, [0], port, "stall-set-up:0", tmp_path, timeout_s=LONG_TIMEOUT_S)
    try:
        _when(port, procs, lambda store: store.check([f"{planted.STALLED_KEY}/0"]), "rank 0 never stalled")
        time.sleep(0.5)  # from the key's set to the wait: one store round trip
        procs[0].send_signal(signal.SIGTERM)
        by = time.monotonic() + faults.UNANSWERED_SIGNAL_S + EXIT_SLACK_S
        said = _ended(procs, by, tmp_path, f"the signal by {faults.UNANSWERED_SIGNAL_S + EXIT_SLACK_S:g} s")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    code, err = said[0]
    lines = _error_lines(err)
    assert code == EXIT_INTERRUPTED and len(lines) == 1, err
    assert "interrupted by SIGTERM before the doctor began (joining the rendezvous" in lines[0], lines
    assert "Traceback" not in err


def test_a_set_up_that_fails_after_the_process_group_exists_is_one_line_on_each_ranks_stderr(tmp_path):
    """Rank 1 stalls before its process group is made; rank 0's group exists and its first exchange waits
    for rank 1 in the store until --timeout, where torch's client logs `[W socket.cpp] waitForInput ...
    timed out` warnings (c10 logging, on stderr): each rank's stderr is its one line, nothing above it."""
    said, _ = _run(2, [0, 1], "stall-set-up:1", tmp_path)
    for rank in (0, 1):
        code, err = said[rank]
        assert code == 3 and err.splitlines() == _error_lines(err) and len(_error_lines(err)) == 1, (rank, err)
    assert "rank 1 (" in said[0][1] and "stalled" in said[0][1], said[0][1]


@pytest.mark.parametrize("stalled", [1, 0])
def test_local_workers_whose_set_up_fails_say_their_lines_and_nothing_of_torchs(tmp_path, stalled):
    """--workers: every rank writes to the one terminal; a set-up that fails, with a group made on one
    side, is each rank's one line there, without torch's C++ warnings above them. Each rank says its own:
    the launcher stops every worker once one ends with an error, so a rank that left its line to another
    could end first and have that one stopped before it spoke (no line at all, seen in 3 runs of 10)."""
    from tests.helpers.launch import run_cli

    done = run_cli(["sweep", "--no-plot",
                    "--workers", "2", "--sizes", "1K", "--iters", "2", "--timeout", f"{TIMEOUT_S:g}",
                    "--no-history", "--out", str(tmp_path / "run")],
                   env={"NCCL_BENCH_FAULT": f"stall-set-up:{stalled}"},
                   timeout=TIMEOUT_S + set_up.ENDS_WITHIN_S + START_LIMIT_S)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    assert 1 <= len(lines) <= 2, done.stderr
    assert all(line.startswith("nccl-bench: error: setting up the sweep failed: ") for line in lines), lines
