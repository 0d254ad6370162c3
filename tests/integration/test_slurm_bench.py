"""nccl_bench under real Slurm on simulated hosts: the shipped sbatch scripts run verbatim, scancel.

The `slurm` fixture (tests/conftest.py): slurmd on node01-node03, node04 in slurm.conf but never
started. deploy/slurm/sweep.sbatch and doctor.sbatch are submitted as they are, with sbatch's own
options for the node, task and GPU counts and the scripts' arguments for small sizes; tasks inherit
the client's environment (PATH, PYTHONPATH), and NCCL_BENCH_PYTHON names this interpreter.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from tests.helpers.launch import REPO, worker_env

pytestmark = pytest.mark.integration

LAYOUT = ["-N", "3", "--ntasks-per-node", "2", "--gpus-per-node", "2"]
SHAPED_RATE = "200mbit"


def _env() -> dict[str, str]:
    return worker_env({"NCCL_BENCH_PYTHON": sys.executable})


def _sbatch(slurm, script: str, args: list[str], cwd, layout: list[str] = LAYOUT, timeout: float = 150):
    done = slurm.run(["sbatch", "--parsable", *layout, str(REPO / "deploy" / "slurm" / script), *args],
                     env=_env(), cwd=cwd)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    return slurm.wait_job_exit(job, timeout), job


def _output(cwd, pattern: str) -> str:
    [path] = cwd.glob(pattern)
    return path.read_text()


def test_sweep_sbatch_verbatim_labelled_output_read_by_report(slurm, tmp_path, cli):
    code, job = _sbatch(slurm, "sweep.sbatch",
                        ["--no-plot", "--op", "all_reduce", "--sizes", "1K,64K", "--iters", "5", "-w", "1"], tmp_path)
    log = _output(tmp_path, f"nccl-bench-sweep-{job}.out")
    assert code == 0, log[-4000:]
    meta = json.loads((tmp_path / f"results/sweep-{job}/meta.json").read_text())
    assert (meta["launcher"], meta["world_size"], meta["nodes"], meta["status"]) == ("slurm", 6, 3, "complete")
    assert meta["hostnames"] == ["node01", "node01", "node02", "node02", "node03", "node03"]
    assert "0: # nccl_bench: backend gloo via slurm, 6 ranks on 3 node(s)" in log  # srun --label
    # `report` reads the job's output file as the run folder it names (relative to the submit folder)
    done = cli(["report", str(tmp_path / f"nccl-bench-sweep-{job}.out"), "--format", "csv"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (tmp_path / f"results/sweep-{job}/results.csv").read_text()


@pytest.mark.alone  # judges a tc-shaped host's bandwidth
def test_doctor_sbatch_names_a_shaped_host_and_one_never_started(slurm, tmp_path):
    slurm.hosts.shape_host(2, SHAPED_RATE)  # node03: every packet it sends through one token bucket
    try:
        # one task per node (the 3 x 2 doctor runs below): half the processes on this 2-core machine
        code, job = _sbatch(slurm, "doctor.sbatch", ["--no-plot", "--size", "1M", "--tolerance", "70%", "--timeout",
                                                      "60", "--expect-hosts", "node[01-04]"], tmp_path,
                            layout=["-N", "3", "--ntasks-per-node", "1", "--gpus-per-node", "1"])
    finally:
        slurm.hosts.tc(2, "qdisc", "del", "dev", "eth0", "root")
    log = _output(tmp_path, f"nccl-bench-doctor-{job}.out")
    assert code == 1, log[-4000:]  # srun's exit code is the tasks': 1 = suspects
    verdict = json.loads((tmp_path / f"results/doctor-{job}/doctor.json").read_text())
    assert [(s["kind"], s["hosts"]) for s in verdict["suspects"]] == [("node", ["node03"]), ("missing", ["node04"])]
    assert verdict["expected_hosts"] == {"hosts": ["node01", "node02", "node03", "node04"],
                                         "source": "--expect-hosts"}
    assert (tmp_path / f"nccl-bench-exclude-{job}.txt").read_text() == "node03\nnode04\n"
    assert f"0: # exclude: node[03-04] (sbatch --exclude=node[03-04]); written to nccl-bench-exclude-{job}.txt" in log
    assert "0: missing node04: expected (--expect-hosts node[01-04]) but never joined the run" in log


def test_srun_doctor_expects_the_jobs_nodelist_and_writes_an_empty_exclude_file(slurm, tmp_path):
    # --tolerance 99%: the launcher's part is checked here, not bandwidth, which the load beside it moves
    exclude = tmp_path / "exclude.txt"
    done = slurm.run(["srun", *LAYOUT, sys.executable, "-m", "nccl_bench", "doctor", "--no-plot", "--size", "1M",
                      "--tolerance", "99%", "--timeout", "60", "--out", str(tmp_path / "run"),
                      "--exclude-file", str(exclude)],
                     env=_env(), cwd=tmp_path, timeout=150)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    verdict = json.loads((tmp_path / "run" / "doctor.json").read_text())
    assert verdict["verdict"] == "healthy" and verdict["exclude"] == []
    assert verdict["expected_hosts"] == {"hosts": ["node01", "node02", "node03"], "source": "SLURM_JOB_NODELIST"}
    assert exclude.read_text() == ""
    assert f"# exclude: none; written to {exclude}" in done.stdout


def test_scancel_of_a_running_sweep_keeps_rows_says_interrupted_in_one_line(slurm, tmp_path):
    out = tmp_path / "run"
    sizes = ",".join(f"{k}K" for k in range(1, 400))
    proc = slurm.popen(["srun", "-N", "2", "--ntasks-per-node", "2", "-J", "cancel-me", sys.executable, "-m",
                        "nccl_bench", "sweep", "--no-plot", "--op", "all_reduce", "--sizes", sizes, "--iters", "5",
                        "-w", "1", "--out", str(out)], env=_env(), cwd=tmp_path)
    deadline = time.monotonic() + 90
    csv = out / "results.csv"
    while not (csv.is_file() and len(csv.read_text().splitlines()) > 2):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    assert slurm.run(["scancel", "--name", "cancel-me"]).returncode == 0
    cancelled = time.monotonic()
    stdout, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - cancelled
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted", stdout[-2000:] + stderr[-2000:]
    rows = csv.read_text().splitlines()[1:]
    assert 2 <= len(rows) < 399 and all(row.startswith("all_reduce,") for row in rows)
    ours = [line for line in stderr.splitlines() if line.startswith("nccl-bench")]
    assert len(ours) == 1 and "interrupted" in ours[0], f"{took:.1f}s\n" + stdout[-3000:] + stderr
    # every task ends with EXIT_INTERRUPTED before KillWait's SIGKILL, so srun exits 130 too
    assert proc.returncode == 130 and took < slurm.kill_wait, (took, stderr)
