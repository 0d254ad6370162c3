"""`nccl-bench doctor --config-only` where rank 0 owns MASTER_PORT (Open MPI's layout variables): real
ranks on this host that exchange their facts over rank 0's socket (ranks/star_gather.py) and never
import torch, read from each rank's own `-X importtime` log; and a rank that never starts, named in one
line by every rank within --timeout, exit 3.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED
from tests.helpers.launch import REPO, worker_env
from tests.helpers.ports import free_port
from tests.helpers.processes import ended_by

pytestmark = pytest.mark.integration

TIMEOUT_S = 3.0
# After --timeout: a rank's exit and this test's poll on a loaded machine (no torch to import or tear down).
EXIT_SLACK_S = 20.0
START_LIMIT_S = 120.0  # for rank 0 to start listening, however loaded the machine
ERROR = "nccl-bench: error: "


def _launch(world: int, ranks: list[int], port: int, tmp_path,
            python: tuple[str, ...] = ()) -> dict[int, subprocess.Popen]:
    procs = {}
    for rank in ranks:
        env = worker_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMPI_COMM_WORLD_RANK": str(rank),
                          "OMPI_COMM_WORLD_SIZE": str(world), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
                          "OMPI_COMM_WORLD_LOCAL_SIZE": str(world)})
        argv = [sys.executable, *python, "-m", "nccl_bench", "doctor", "--no-plot",
                "--config-only", "--timeout", f"{TIMEOUT_S:g}",
                "--no-history", "--out", str(tmp_path / "run")]
        with open(tmp_path / f"rank{rank}.err", "w") as err:  # a file: a full pipe would hold the rank
            procs[rank] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO,
                                           start_new_session=True)
    return procs


def _ended(procs: dict[int, subprocess.Popen], by: float, tmp_path) -> dict[int, tuple[int | None, str]]:
    """Each rank's exit code and stderr; a rank still running at `by` is killed and fails the test."""
    late = ended_by(procs, by)
    said = {rank: (proc.returncode, (tmp_path / f"rank{rank}.err").read_text()) for rank, proc in procs.items()}
    assert not late, f"ranks {late} were still running: {said}"
    return said


def _listening_at(port: int, procs: dict[int, subprocess.Popen]) -> float:
    """When rank 0's socket first accepted a connection (one that says nothing is dropped by rank 0)."""
    limit = time.monotonic() + START_LIMIT_S
    while time.monotonic() < limit and procs[0].poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return time.monotonic()
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"rank 0 never listened: exit codes {[p.poll() for p in procs.values()]}")


def _imported(log: str) -> set[str]:
    """The modules a `-X importtime` log says were imported."""
    return {line.rsplit("|", 1)[1].strip() for line in log.splitlines() if line.startswith("import time:")}


def test_config_only_ranks_exchange_their_facts_without_importing_torch(tmp_path):
    procs = _launch(3, [0, 1, 2], free_port(), tmp_path, ("-X", "importtime"))
    said = _ended(procs, time.monotonic() + START_LIMIT_S, tmp_path)
    assert [code for code, _ in said.values()] == [0, 0, 0], said
    for rank, (_, log) in said.items():
        modules = _imported(log)
        assert "nccl_bench.doctor.config_facts" in modules, (rank, log[-2000:])  # the log is the rank's whole run
        assert not {m for m in modules if m == "torch" or m.startswith("torch.")}, (rank, sorted(modules)[:20])
    out = tmp_path / "run"
    meta, doctor = json.loads((out / "meta.json").read_text()), json.loads((out / "doctor.json").read_text())
    assert (meta["status"], meta["world_size"], doctor["verdict"]) == ("complete", 3, "healthy")
    import torch  # this test process's torch: what the ranks would have said with it

    assert meta["versions"]["torch"] == torch.__version__
    [host] = doctor["config"]["hosts"]  # three ranks on one host: its first rank read the facts
    assert host["facts"]["torch"] == {"value": torch.__version__, "source": "torch/version.py"}


def test_a_rank_that_never_starts_is_named_in_one_line_by_every_rank_within_the_timeout(tmp_path):
    port = free_port()
    procs = _launch(4, [0, 1, 2], port, tmp_path)
    try:
        listening = _listening_at(port, procs)
        said = _ended(procs, listening + TIMEOUT_S + EXIT_SLACK_S, tmp_path)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    for rank, (code, err) in said.items():
        lines = [line for line in err.splitlines() if line.startswith(ERROR)]
        assert code == EXIT_RUN_FAILED and len(lines) == 1, (rank, err)
        assert lines[0] == (f"{ERROR}setting up the doctor failed: rank 3 never joined (3 of 4 did); rank 0 saw: "
                            f"joining made no progress for more than {TIMEOUT_S:g} s (--timeout {TIMEOUT_S:g} s)"), (
            rank, err)
        assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing was gathered: no run folder is left saying so


def test_ranks_whose_rank_zero_never_starts_name_its_address_within_the_timeout(tmp_path):
    port = free_port()
    started = time.monotonic()
    said = _ended(_launch(3, [1, 2], port, tmp_path), started + TIMEOUT_S + EXIT_SLACK_S, tmp_path)
    for rank, (code, err) in said.items():
        lines = [line for line in err.splitlines() if line.startswith(ERROR)]
        assert code == EXIT_RUN_FAILED and len(lines) == 1, (rank, err)
        assert lines[0].startswith(f"{ERROR}setting up the doctor failed: rank 0 at MASTER_ADDR=127.0.0.1 "
                                   f"MASTER_PORT={port} never answered rank {rank} within --timeout {TIMEOUT_S:g} s")
