"""nccl_bench under a real Open MPI mpirun across simulated hosts (the `mpi` fixture: node01-node03).

The command lines are the README's: MASTER_ADDR and MASTER_PORT forwarded with -x (mpirun sets
neither); PYTHONPATH too, because ranks on other hosts get only what -x forwards and this checkout
is not installed there. `--tag-output` output is read back by `report`.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.helpers.launch import REPO

pytestmark = pytest.mark.integration

# What these tests check is the launcher's part (who joined, what the ranks print and exit with), not
# bandwidth: a pair would have to fall below 1% of the fleet's median to be named, which the load of
# the tests beside them never makes it (tests/integration/test_doctor_hosts.py judges bandwidth, alone).
LOOSE = "99%"
FORWARD = ["-x", "MASTER_ADDR=node01", "-x", "MASTER_PORT=29500", "-x", f"PYTHONPATH={REPO}", "-x", "OMP_NUM_THREADS=1"]


def test_mpirun_sweep_tagged_output_read_by_report(mpi, tmp_path, cli):
    out = tmp_path / "run"
    done = mpi.mpirun(["--tag-output", "-np", "4", "-H", "node01:2,node02:2", *FORWARD, sys.executable, "-m",
                       "nccl_bench", "sweep", "--no-plot", "--op", "all_reduce", "--sizes", "1K,64K", "--iters", "5",
                       "-w", "1", "--out", str(out)], cwd=tmp_path, timeout=150)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[1,0]<stdout>:# nccl_bench: backend gloo via mpirun, 4 ranks on 2 node(s)" in done.stdout
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["launcher"], meta["world_size"], meta["hostnames"]) == ("mpirun", 4, ["node01"] * 2 + ["node02"] * 2)
    log = tmp_path / "mpirun.out"
    log.write_text(done.stdout)
    report = cli(["report", str(log), "--format", "csv"], cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert report.stdout == (out / "results.csv").read_text()


def test_mpirun_doctor_names_the_host_that_never_joined(mpi, tmp_path):
    exclude = tmp_path / "exclude.txt"
    done = mpi.mpirun(["-np", "4", "-H", "node01:2,node02:2", *FORWARD, sys.executable, "-m", "nccl_bench", "doctor",
                       "--no-plot", "--size", "1M", "--tolerance", LOOSE, "--timeout", "60",
                       "--expect-hosts", "node[01-03]", "--exclude-file", str(exclude), "--out", str(tmp_path / "run")],
                      cwd=tmp_path, timeout=150)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # mpirun passes on rank 0's 1
    verdict = json.loads((tmp_path / "run" / "doctor.json").read_text())
    assert [(s["kind"], s["hosts"]) for s in verdict["suspects"]] == [("missing", ["node03"])]
    assert [n["host"] for n in verdict["nodes"]] == ["node01", "node02"]
    assert exclude.read_text() == "node03\n"
    assert f"# exclude: node03 (sbatch --exclude=node03); written to {exclude}" in done.stdout


def test_mpirun_doctor_with_suspects_ends_the_job_only_after_rank_0_has_said_its_last_line(mpi, tmp_path):
    # mpirun kills every rank once one exits non-zero. Rank 0 says its closing lines only after the other
    # rank on its host has ended (the planted outlive fault), so a verdict exit from any rank but rank 0
    # would cut them off every time; what rank 0 does after the run (the history) must come through too.
    exclude = tmp_path / "exclude.txt"
    done = mpi.mpirun(["-np", "4", "-H", "node01:2,node02:2", *FORWARD, "-x", "NCCL_BENCH_FAULT=outlive:0",
                       sys.executable, "-m", "nccl_bench", "doctor", "--no-plot", "--size", "64K", "--tolerance", LOOSE,
                       "--timeout", "60", "--expect-hosts", "node[01-03]", "--exclude-file", str(exclude),
                       "--out", str(tmp_path / "run")], cwd=tmp_path, timeout=150)
    said = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 1, said
    assert re.search(r"Process name: \[\[\d+,\d+\],0\]", done.stderr), said  # the first to exit non-zero: rank 0
    assert f"# exclude: node03 (sbatch --exclude=node03); written to {exclude}" in done.stdout, said
    assert done.stdout.rstrip().splitlines()[-1].startswith("# complete: 4 measurement(s) in "), said
    assert "recorded run " in done.stderr, said
    assert exclude.read_text() == "node03\n"
