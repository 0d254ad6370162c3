"""Real Open MPI `mpirun` across simulated hosts, without nccl_bench.

The `mpi` fixture (tests/conftest.py, tests/helpers/simmpi.py) gives three hosts node01..node03; mpirun
runs on node01 and reaches the others through an rsh agent that enters their namespaces with the
bare environment of an ssh login. These tests pin down what mpirun really sets and prints
(tests/SCHEDULERS.md writes it down for the launcher code).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.launch import REPO, ok

pytestmark = pytest.mark.integration

LAYOUT_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "PMIX_HOSTNAME")


def _tagged(stdout: str) -> dict[int, list[str]]:
    """`--tag-output` stdout -> {rank: [lines]}; each line starts `[<job>,<rank>]<stdout>:`."""
    ranks: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        assert line.startswith("[1,") and "]<stdout>:" in line, line
        tag, _, text = line.partition("]<stdout>:")
        ranks.setdefault(int(tag.split(",")[1]), []).append(text)
    return ranks


def test_mpirun_four_ranks_on_two_hosts(mpi):
    out = ok(mpi.mpirun(["-np", "4", "--host", "node01:2,node02:2", "--tag-output", "printenv", *LAYOUT_VARS]))
    ranks = _tagged(out)
    # by slot: ranks 0,1 fill node01's two slots, 2,3 node02's
    assert ranks == {r: [str(r), "4", str(r % 2), "2", str(r % 2), f"node0{r // 2 + 1}"] for r in range(4)}
    hosts = ok(mpi.mpirun(["-np", "4", "--host", "node01:2,node02:2", "sh", "-c",
                            "echo $OMPI_COMM_WORLD_RANK $(hostname)"]))
    assert sorted(hosts.splitlines()) == ["0 node01", "1 node01", "2 node02", "3 node02"]


def test_mpirun_hostfile_and_map_by_node(mpi):
    hostfile = mpi.hostfile(2)
    show = ["sh", "-c", "echo $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_LOCAL_RANK $(hostname)"]
    by_slot = ok(mpi.mpirun(["-np", "6", "--hostfile", str(hostfile), *show]))
    by_node = ok(mpi.mpirun(["-np", "6", "--hostfile", str(hostfile), "--map-by", "node", *show]))
    assert sorted(by_slot.splitlines()) == [f"{r} {r % 2} node0{r // 2 + 1}" for r in range(6)]
    assert sorted(by_node.splitlines()) == [f"{r} {r // 3} node0{r % 3 + 1}" for r in range(6)]


def test_tag_output_prefixes(mpi):
    done = mpi.mpirun(["-np", "2", "--host", "node01,node02", "--tag-output", "sh", "-c",
                       "echo out; echo err >&2; printf tail"])
    ok(done)
    # an unterminated last line gets no newline of its own: two ranks' tails run together
    assert sorted(done.stdout.replace("tail[", "tail\n[").splitlines()) == [
        "[1,0]<stdout>:out", "[1,0]<stdout>:tail", "[1,1]<stdout>:out", "[1,1]<stdout>:tail"]
    assert sorted(done.stderr.splitlines()) == ["[1,0]<stderr>:err", "[1,1]<stderr>:err"]


def test_remote_ranks_get_only_what_mpirun_forwards(mpi):
    """Ranks on mpirun's own host inherit its environment; on other hosts (an ssh login) only `-x` names
    arrive, so MASTER_ADDR/MASTER_PORT, PATH and PYTHONPATH must be forwarded as the README shows."""
    show = ["--tag-output", "sh", "-c", "echo ${NB_PROBE-unset} ${MASTER_ADDR-unset} ${MASTER_PORT-unset}"]
    env = {"NB_PROBE": "here", "MASTER_ADDR": "node01", "MASTER_PORT": "29500"}
    plain = _tagged(ok(mpi.mpirun(["-np", "2", "--host", "node01,node02", *show], env=env)))
    forwarded = _tagged(ok(mpi.mpirun(["-np", "2", "--host", "node01,node02", "-x", "MASTER_ADDR", "-x",
                                        "MASTER_PORT", "-x", "NB_PROBE", *show], env=env)))
    assert plain == {0: ["here node01 29500"], 1: ["unset unset unset"]}
    assert forwarded == {0: ["here node01 29500"], 1: ["here node01 29500"]}


def test_a_rank_exiting_nonzero_fails_the_job(mpi):
    done = mpi.mpirun(["-np", "3", "--host", "node01,node02,node03", "sh", "-c",
                       "[ $OMPI_COMM_WORLD_RANK = 2 ] && exit 3; exit 0"])
    assert done.returncode == 3, done
    # always this block; the one naming the rank ("Process name: [[J,1],2]", "Exit code:    3")
    # only when mpirun is not too busy to print it
    assert "Primary job  terminated normally, but 1 process returned" in done.stderr, done.stderr


def test_a_host_that_cannot_be_reached_fails_the_launch(mpi):
    """A hostfile naming a host the agent cannot reach (as ssh to a dead node): no rank starts anywhere."""
    done = mpi.mpirun(["-np", "2", "--host", "node01,node09", "sh", "-c", "echo started"], timeout=60)
    assert done.returncode != 0 and "started" not in done.stdout, done
    assert "no simulated host named 'node09'" in done.stderr, done.stderr
    assert "ORTE was unable to reliably start one or more daemons" in done.stderr, done.stderr


def test_sigterm_to_mpirun_reaches_every_rank(mpi, tmp_path):
    """mpirun SIGTERMed: each rank gets SIGCONT, SIGTERM 1 s later and SIGKILL 1 s after that, one host
    after another (mpirun's own host first); mpirun exits 1 and prints nothing."""
    trap = tmp_path / "trap.py"
    trap.write_text(
        "import os, signal, sys, time\n"
        "log = os.path.join(sys.argv[1], 'rank' + os.environ['OMPI_COMM_WORLD_RANK'])\n"
        "def note(text):\n"
        "    with open(log, 'a') as f:\n"
        "        f.write(f'{time.time():.3f} {text}\\n')\n"
        "for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGCONT):\n"
        "    signal.signal(sig, lambda s, f: note(signal.Signals(s).name))\n"
        "note('started')\n"
        "while True:\n"
        "    time.sleep(0.05)\n")
    proc = mpi.popen(["-np", "2", "--host", "node01,node02", sys.executable, str(trap), str(tmp_path)])
    try:
        deadline = time.monotonic() + 20
        while not all((tmp_path / f"rank{r}").exists() for r in range(2)):
            assert time.monotonic() < deadline, "ranks did not start"
            time.sleep(0.1)
        sent = time.time()
        os.kill(proc.pid, signal.SIGTERM)  # the pid is mpirun's: ip netns exec, unshare and sh exec into it
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    took = time.time() - sent
    got = {}
    for r in range(2):
        lines = (tmp_path / f"rank{r}").read_text().splitlines()[1:]
        got[r] = [(float(when) - sent, name) for when, name in (line.split() for line in lines)]
    for r, seen in got.items():
        assert [name for _, name in seen] == ["SIGCONT", "SIGTERM"], (r, seen)
        assert 0.5 < seen[1][0] - seen[0][0] < 2.5, (r, seen)  # SIGTERM a second after SIGCONT
    assert got[1][0][0] > got[0][1][0], got  # the second host's ranks only after the first host's
    assert proc.returncode == 1 and took < 15, (proc.returncode, took, err)


def test_a_rank_imports_torch_from_the_projects_venv(mpi):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(f"torch is not installed for {sys.executable} (bash scripts/dev.sh test installs it)")
    env = {"PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(REPO)}
    code = "import os, sys, torch; print(os.uname().nodename, sys.prefix, torch.__version__, os.environ['PYTHONPATH'])"
    # one rank, on another host than mpirun's: it sees only what -x forwards
    out = ok(mpi.mpirun(["-np", "1", "--host", "node02", "-x", "PATH", "-x", "PYTHONPATH", "python", "-c", code],
                         env=env, timeout=120))
    assert out.split() == ["node02", sys.prefix, importlib.metadata.version("torch"), str(REPO)]
