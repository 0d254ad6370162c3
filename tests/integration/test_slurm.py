"""Real Slurm (slurmctld, slurmd, srun, sbatch, scancel, sinfo) on simulated hosts, without nccl_bench.

The `slurm` fixture (tests/conftest.py, tests/helpers/simslurm.py) runs munged and slurmctld on node01 and
a slurmd on node01-node03, each in its own network namespace with its own hostname; node04 is in
slurm.conf but never started. These tests pin down what the real programs do (environment,
labels, signals, states), which tests/SCHEDULERS.md writes down for the launcher code.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.launch import REPO, ok
from tests.helpers.processes import wait_for

pytestmark = pytest.mark.integration

STARTED = ("node01", "node02", "node03")


def _task_env(stdout: str) -> dict[int, dict[str, str]]:
    """`srun --label env` output -> {task: {name: value}}."""
    tasks: dict[int, dict[str, str]] = {}
    for line in stdout.splitlines():
        label, _, rest = line.partition(": ")
        name, _, value = rest.partition("=")
        tasks.setdefault(int(label), {})[name] = value
    return tasks


def _labelled(stdout: str) -> dict[int, str]:
    """`srun --label` output with one line per task -> {task: line}."""
    return {int(label): text for label, _, text in (line.partition(": ") for line in stdout.splitlines())}


def test_srun_places_two_tasks_on_each_of_three_hosts(slurm):
    fields = ("$(hostname) $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_NTASKS $SLURM_STEP_NUM_NODES "
              "$SLURM_STEP_NUM_TASKS $SLURM_JOB_NODELIST $SLURM_STEP_ID $SLURM_TASKS_PER_NODE")
    out = ok(slurm.run(["srun", "-N", "3", "--ntasks-per-node", "2", "sh", "-c", f"echo {fields}"], host=1))
    rows = sorted((line.split() for line in out.splitlines()), key=lambda row: int(row[1]))
    assert Counter(row[0] for row in rows) == {name: 2 for name in STARTED}
    # block distribution: tasks 0,1 on the first node, 2,3 on the second...; one step (0) of one job
    assert [row[:4] for row in rows] == [[STARTED[i // 2], str(i), str(i % 2), str(i // 2)] for i in range(6)]
    assert {tuple(row[4:]) for row in rows} == {("6", "3", "6", "node[01-03]", "0", "2(x3)")}


def test_srun_uneven_and_cyclic_layouts(slurm):
    fields = "$(hostname) $SLURM_PROCID $SLURM_LOCALID $SLURM_TASKS_PER_NODE $SLURM_STEP_TASKS_PER_NODE"
    two = ["srun", "-N", "2", "-n", "3", "-w", "node01,node02"]  # the nodes named: any two may be picked
    block = ok(slurm.run([*two, "sh", "-c", f"echo {fields}"]))
    cyclic = ok(slurm.run([*two, "--distribution", "cyclic", "sh", "-c", f"echo {fields}"]))
    assert sorted(block.splitlines(), key=lambda line: line.split()[1]) == [
        "node01 0 0 2,1 2,1", "node01 1 1 2,1 2,1", "node02 2 0 2,1 2,1"]
    assert sorted(cyclic.splitlines(), key=lambda line: line.split()[1]) == [
        "node01 0 0 2,1 2,1", "node02 1 0 2,1 2,1", "node01 2 1 2,1 2,1"]


def test_srun_task_environment(slurm):
    """Every variable a task gets (printed in full on failure): the launcher code reads these."""
    out = ok(slurm.run(["srun", "-N", "2", "--ntasks-per-node", "2", "--label", "env"], host=2,
                        env={"NB_PROBE": "from-the-client"}))
    tasks = _task_env(out)
    assert sorted(tasks) == [0, 1, 2, 3]
    for task, env in tasks.items():
        expected = {
            "SLURM_PROCID": str(task), "SLURM_LOCALID": str(task % 2), "SLURM_NODEID": str(task // 2),
            "SLURMD_NODENAME": STARTED[task // 2], "SLURM_TOPOLOGY_ADDR": STARTED[task // 2],
            "SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_STEP_NUM_TASKS": "4",
            "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "node[01-02]", "SLURM_NODELIST": "node[01-02]",
            "SLURM_STEP_NODELIST": "node[01-02]",
            "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_GTIDS": f"{task // 2 * 2},{task // 2 * 2 + 1}",
            "SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_JOB_NAME": "env", "SLURM_JOB_PARTITION": "sim",
            "SLURM_SUBMIT_HOST": "node03", "SLURM_LAUNCH_NODE_IPADDR": slurm.hosts.addresses[2],
            "SLURM_SRUN_COMM_HOST": slurm.hosts.addresses[2], "SLURM_CPUS_ON_NODE": "2", "SLURM_LABELIO": "1",
            "SLURM_CONF": str(slurm.conf),
            "NB_PROBE": "from-the-client",  # srun's --export=ALL: the client's whole environment goes along
        }
        assert {k: env.get(k) for k in expected} == expected, "\n".join(f"{k}={v}" for k, v in sorted(env.items()))
        assert env["SLURM_JOB_ID"] == env["SLURM_JOBID"]
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"):
            assert name not in env, f"srun set {name}={env[name]}"


def test_srun_label_prefixes(slurm):
    few = slurm.run(["srun", "-N", "3", "-n", "3", "--label", "sh", "-c", "echo out; echo err >&2; printf tail"])
    ok(few)
    assert sorted(few.stdout.splitlines()) == sorted(f"{t}: {text}" for t in range(3) for text in ("out", "tail"))
    # srun's own notes share stderr: an allocation that waits for the last test's job to drain says
    # "srun: job N queued and waiting for resources", then "srun: job N has been allocated resources"
    tasks = [line for line in few.stderr.splitlines() if not line.startswith("srun: job ")]
    assert sorted(tasks) == [f"{t}: err" for t in range(3)]
    many = ok(slurm.run(["srun", "-N", "3", "-n", "12", "--label", "echo", "hi"]))
    # the label is right-aligned to the widest task number: " 0: " ... "11: "
    assert sorted(many.splitlines()) == sorted(f"{t:>2}: hi" for t in range(12))


def test_sbatch_script_writes_its_output(slurm, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH -N 3\n#SBATCH --ntasks-per-node=2\n#SBATCH -J nbtest\n"
        "echo batch on $(hostname) procid=$SLURM_PROCID ntasks=$SLURM_NTASKS nodes=$SLURM_JOB_NODELIST "
        "step=${SLURM_STEP_ID-unset}\n"
        "srun --label sh -c 'echo $(hostname) $SLURM_PROCID $SLURM_STEP_ID'\n"
        "srun -N 1 -n 1 sh -c 'echo second step $SLURM_STEP_ID'\n")
    out_pattern = tmp_path / "job-%j.out"
    job = ok(slurm.run(["sbatch", "--parsable", "--output", str(out_pattern), str(script)], host=2)).strip()
    assert job.isdigit(), job
    slurm.wait_job_gone(job, timeout=30)
    text = (tmp_path / f"job-{job}.out").read_text()
    # srun's own notes go to the same file: under load the second step may first be refused while the
    # first step's resources are released ("srun: Job N step creation temporarily disabled, retrying
    # (Requested nodes are busy)", then "srun: Step created for job N")
    lines = [line for line in text.splitlines() if not line.startswith("srun: ")]
    assert all("step creation temporarily disabled" in line or "Step created" in line
               for line in text.splitlines() if line.startswith("srun: ")), text
    assert lines[0] == "batch on node01 procid=0 ntasks=6 nodes=node[01-03] step=unset"
    assert sorted(lines[1:7]) == sorted(f"{t}: {STARTED[t // 2]} {t} 0" for t in range(6))
    assert lines[7:] == ["second step 1"]


def _trap_script(folder: Path) -> Path:
    """A task that logs every catchable signal it gets (time, name) to folder/task<PROCID>; `exit`
    as its argument makes it exit 0 on SIGTERM, otherwise it ignores SIGTERM (so SIGKILL has to come)."""
    script = folder / "trap.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "log = os.path.join(sys.argv[1], 'task' + os.environ['SLURM_PROCID'])\n"
        "def note(text):\n"
        "    with open(log, 'a') as f:\n"
        "        f.write(f'{time.time():.3f} {text}\\n')\n"
        "def handler(sig, frame):\n"
        "    note(signal.Signals(sig).name)\n"
        "    if sig == signal.SIGTERM and sys.argv[2] == 'exit':\n"
        "        sys.exit(0)\n"
        "for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,\n"
        "            signal.SIGTERM, signal.SIGCONT, signal.SIGALRM, signal.SIGTSTP, signal.SIGPIPE):\n"
        "    signal.signal(sig, handler)\n"
        "note('started')\n"
        "while True:\n"
        "    time.sleep(0.05)\n")
    return script


def _job_id(slurm, name: str) -> str:
    ids = slurm.run(["squeue", "--noheader", "--name", name, "--format", "%i"]).stdout.split()
    assert len(ids) == 1, f"squeue --name {name}: {ids}"
    return ids[0]


def _start_and_cancel(slurm, tmp_path, name: str, argv: list[str], tasks: int):
    """srun ARGV on two nodes; once every task has logged 'started', scancel the job.
    Returns (srun's exit code, its stderr, seconds from scancel to srun's exit, the scancel time)."""
    srun = slurm.popen(["srun", "-J", name, "-N", "2", "--ntasks-per-node", str(tasks // 2), *argv], host=1)
    try:
        wait_for(lambda: all((tmp_path / f"task{t}").exists() for t in range(tasks)), 20, "every task to start")
        job = _job_id(slurm, name)
        cancelled = time.time()
        ok(slurm.run(["scancel", job]))
        _, err = srun.communicate(timeout=slurm.kill_wait + 20)
        return srun.returncode, err, time.time() - cancelled, cancelled
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.communicate()


def _signals(tmp_path, tasks: int) -> dict[int, list[tuple[float, str]]]:
    logs = {}
    for t in range(tasks):
        lines = (tmp_path / f"task{t}").read_text().split("\n")
        logs[t] = [(float(when), what) for when, _, what in (line.partition(" ") for line in lines if line)][1:]
    return logs


def test_scancel_sends_sigcont_sigterm_then_sigkill_after_killwait(slurm, tmp_path):
    trap = _trap_script(tmp_path)
    rc, err, took, cancelled = _start_and_cancel(slurm, tmp_path, "nbtrap",
                                                 [sys.executable, str(trap), str(tmp_path), "ignore"], 2)
    for task, got in _signals(tmp_path, 2).items():
        # both sent at once: which handler Python runs first is not Slurm's order
        assert sorted(name for _, name in got) == ["SIGCONT", "SIGTERM"], (task, got)
        assert all(when - cancelled < slurm.kill_wait - 1 for when, _ in got), (task, got)  # before KillWait
    # SIGTERM ignored: slurmstepd's SIGKILL comes KillWait seconds later; srun reports 128 + 9
    assert slurm.kill_wait - 0.5 <= took < slurm.kill_wait + 10, took
    assert rc == 137, err
    assert _said_cancelled(err) and f"Waiting up to {slurm.kill_wait + 2} seconds" in err, err
    assert "task 0: Killed" in err and "task 1: Killed" in err, err


def _said_cancelled(err: str) -> bool:
    """srun says a cancelled step was cancelled: slurmstepd's `*** STEP ... CANCELLED AT ...` line, which
    reaches srun only while the step's I/O connection is still open, or srun's own `Job step aborted`."""
    return "CANCELLED AT" in err or "Job step aborted" in err


def test_scancel_of_a_task_that_exits_on_sigterm(slurm, tmp_path):
    """srun's exit code is the tasks' own: a tool that exits 0 on SIGTERM makes a cancelled srun exit 0."""
    trap = _trap_script(tmp_path)
    rc, err, took, _ = _start_and_cancel(slurm, tmp_path, "nbexit", [sys.executable, str(trap), str(tmp_path), "exit"],
                                         2)
    for task, got in _signals(tmp_path, 2).items():
        # Slurm sends SIGCONT and SIGTERM at once; Python runs pending handlers in signal-number order, so
        # SIGTERM's (15) may exit before SIGCONT's (18) runs: only SIGTERM is sure to be logged.
        assert sorted(name for _, name in got) in (["SIGTERM"], ["SIGCONT", "SIGTERM"]), (task, got)
    assert rc == 0, err
    assert took < slurm.kill_wait, took
    assert _said_cancelled(err), err


def test_scancel_ends_srun_sleep(slurm, tmp_path):
    srun = slurm.popen(["srun", "-J", "nbsleep", "-N", "3", "sleep", "300"])
    try:
        wait_for(lambda: slurm.run(["squeue", "--noheader", "--steps", "--name", "nbsleep"]).stdout.strip(), 20,
                  "the step to run")
        job = _job_id(slurm, "nbsleep")
        ok(slurm.run(["scancel", job]))
        _, err = srun.communicate(timeout=slurm.kill_wait + 20)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.communicate()
    assert srun.returncode == 143, err  # sleep dies of the SIGTERM: 128 + 15
    assert "Terminated" in err and _said_cancelled(err), err
    slurm.wait_job_gone(job)


def test_a_host_whose_slurmd_never_started_is_not_usable(slurm):
    states = slurm.node_states()
    assert states["node04"] in ("unk", "unk*", "down", "down*"), states
    shown = ok(slurm.run(["scontrol", "show", "node", "node04"]))
    assert "State=UNKNOWN" in shown or "State=DOWN" in shown, shown
    # Slurm never hands it out: a job that needs it waits (here: gives up after --immediate)
    done = slurm.run(["srun", "-N", "4", "--immediate=1", "hostname"], timeout=30)
    assert done.returncode == 1 and "Required node not available" in done.stderr, done.stderr


def test_gpus_become_cuda_visible_devices(slurm):
    show = ["--label", "sh", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}"]
    per_node = ok(slurm.run(["srun", "-N", "2", "--ntasks-per-node", "2", "--gpus-per-node", "2", *show]))
    per_task = ok(slurm.run(["srun", "-N", "2", "--ntasks-per-node", "2", "--gpus-per-task", "1", *show]))
    none = ok(slurm.run(["srun", "-N", "2", *show]))
    assert _labelled(per_node) == {t: "0,1" for t in range(4)}  # every task sees both of its node's GPUs
    assert _labelled(per_task) == {t: str(t % 2) for t in range(4)}  # one each, so each task's is cuda:0
    assert _labelled(none) == {0: "unset", 1: "unset"}


def test_a_task_imports_torch_from_the_projects_venv(slurm):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(f"torch is not installed for {sys.executable} (bash scripts/dev.sh test installs it)")
    venv_bin = str(Path(sys.executable).parent)
    env = {"PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    code = "import os, sys, torch; print(os.uname().nodename, sys.prefix, torch.__version__, os.environ['PYTHONPATH'])"
    # one task on another host than the client's (importing torch takes seconds of these 2 cores)
    out = ok(slurm.run(["srun", "-w", "node03", "-n", "1", "python", "-c", code], env=env, timeout=120))
    assert out.split() == ["node03", sys.prefix, importlib.metadata.version("torch"), str(REPO)]


@pytest.fixture
def slurm3(tmp_path_factory):
    """A cluster of its own (node01-node03, all started) for a test that breaks a host."""
    from tests.helpers.simslurm import start_slurm

    yield from start_slurm(tmp_path_factory, 3)


def test_a_host_lost_after_allocation(slurm3, tmp_path):
    """Slurm never allocates a host that is down, so a host in SLURM_JOB_NODELIST that runs no task is
    one lost after allocation: the other hosts' tasks start and run, srun fails after MessageTimeout."""
    go = tmp_path / "go"
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.1; done\n"
                      "srun --label sh -c 'echo $(hostname) $SLURM_STEP_NUM_NODES $SLURM_NTASKS'\necho srun rc=$?\n"
                      "sleep 300\n")
    job = ok(slurm3.run(["sbatch", "--parsable", "-N", "3", "--output", str(out), str(script)])).strip()
    slurm3.wait_nodes(STARTED, ("alloc", "mix"), timeout=20)  # mix: one of the node's 4 CPUs in use
    slurm3.kill_host(2)  # node03's slurmd and everything else in its namespace, at once
    go.touch()
    wait_for(lambda: out.exists() and "srun rc=" in out.read_text(), 40, "the step to fail")
    lines = out.read_text().splitlines()
    assert sorted(line for line in lines if line[:1].isdigit()) == ["0: node01 3 3", "1: node02 3 3"]
    assert f"srun: error: Task launch for StepId={job}.0 failed on node node03: Communication connection failure" \
        in lines, lines
    assert lines[-1] != "srun rc=0", lines
    ok(slurm3.run(["scancel", job]))
