"""Stopping a launcher-less sweep, and a rendezvous nobody answers, with real processes.

`nccl-bench sweep` without a launcher starts its ranks through torch's elastic agent; a Ctrl-C
(SIGINT to the whole process group, as a terminal sends it) or a SIGTERM to the command must end
in one line and exit 130, with every finished row kept. A rank whose MASTER_ADDR/MASTER_PORT
leads nowhere must say so in one line, without torch's C++ stack frames or an empty run folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import DOCTOR_JSON, read_meta
from tests.helpers.fake_smi import hanging_smi_env
from tests.helpers.launch import run_cli, worker_env
from tests.helpers.ports import free_port
from tests.helpers.processes import wait_for
from tests.helpers.rows import rows_on_disk

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("signals")]

# Enough small points that the sweep is still running when the signal lands.
SWEEP = ["sweep", "--no-plot", "--op", "all_reduce", "--sizes", "1K,2K,4K,8K,16K,32K,64K,128K", "--iters", "20",
         "--warmup", "1", "--trials", "40", "--workers", "2"]
ERROR = "nccl-bench: error: "


def _start(args: list[str], logs: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nccl_bench", *args], stdout=open(logs / "stdout.txt", "w"),
        stderr=open(logs / "stderr.txt", "w"), start_new_session=True, env=worker_env(env),
    )


def _interrupt_after_rows(proc: subprocess.Popen, out: Path, rows: int, send) -> int:
    """Once results.csv holds `rows` rows, send() the interrupt; the command's exit code (killed if it hangs)."""
    try:
        wait_for(lambda: rows_on_disk(out) >= rows, 120, proc=proc)
        send()
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _errors(logs: Path) -> list[str]:
    text = (logs / "stderr.txt").read_text()
    assert "Traceback" not in text and "frame #" not in text, text[-3000:]
    return [line for line in text.splitlines() if line.startswith(ERROR)]


# SIGHUP and SIGQUIT take SIGTERM's path (tests/unit/ranks/test_faults_signals.py checks each one raises).
@pytest.mark.parametrize("how", ["SIGTERM to the command", "Ctrl-C to the process group"])
def test_an_interrupted_sweep_says_one_line_and_keeps_its_rows(tmp_path, how):
    out = tmp_path / "run"
    proc = _start([*SWEEP, "--out", str(out)], tmp_path)
    name = how.split()[0] if how.startswith("SIG") else "SIGINT"
    if how.startswith("SIG"):
        code = _interrupt_after_rows(proc, out, 2, lambda: os.kill(proc.pid, getattr(signal, name)))
    else:
        code = _interrupt_after_rows(proc, out, 2, lambda: os.killpg(proc.pid, signal.SIGINT))
    rows = read_rows(out)
    assert code == 130, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert _errors(tmp_path) == [
        f"{ERROR}interrupted by {name}; the {len(rows)} row(s) measured so far are kept in {out}"
    ]
    assert len(rows) >= 2 and read_meta(out)["status"] == "interrupted"


def test_an_interrupted_doctor_says_one_line_too(tmp_path):
    """The sibling of the sweep's case: doctor's launcher-less path also ends a Ctrl-C in one line."""
    out = tmp_path / "run"
    proc = _start(["doctor", "--no-plot", "--workers", "2", "--samples", "500", "--iters", "50", "--size", "64K",
                   "--out", str(out)], tmp_path)
    try:
        wait_for(lambda: (out / "meta.json").is_file(), 120, proc=proc)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert _errors(tmp_path) == [f"{ERROR}interrupted by SIGINT; what was measured so far is kept in {out}"]
    assert read_meta(out)["status"] == "interrupted"


def _interrupt_when(proc: subprocess.Popen, ready) -> int:
    """Once ready() holds, Ctrl-C to the command's process group; the command's exit code (killed if it hangs)."""
    try:
        wait_for(ready, 120, proc=proc)
        os.killpg(proc.pid, signal.SIGINT)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize(("phases", "layout"), [(["--config-only"], "workers"), ([], "workers"),
                                               (["--config-only"], "mpirun")],
                         ids=["config-only", "measuring", "config-only-without-torch"])
def test_a_doctor_interrupted_in_its_configuration_phase_says_one_line(tmp_path, phases, layout):
    """Rank 0's `nvidia-smi -q` hangs (a GPU that stopped answering), so the configuration phase holds
    until the Ctrl-C: one line, exit 130, meta.json interrupted; no host's facts were gathered, so
    there is nothing to judge and no doctor.json. Under Open MPI's layout variables (one rank, which owns
    MASTER_PORT) --config-only runs without torch (ranks/star_gather.py) and ends alike."""
    out, started = tmp_path / "run", tmp_path / "smi-started"
    ranks = ["--workers", "2"] if layout == "workers" else []
    one_rank = {} if layout == "workers" else {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1",
                                                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    proc = _start(["doctor", "--no-plot", *phases, *ranks, "--out", str(out)], tmp_path,
                  {**hanging_smi_env("-q", started), **one_rank})
    code = _interrupt_when(proc, started.is_file)
    assert code == 130, (tmp_path / "stderr.txt").read_text()[-3000:]
    # under a launcher the rank says the command's own words (cli/on_ranks); local workers' parent names the folder
    kept = f"what was measured so far is kept in {out}" if layout == "workers" else "measurements so far are kept"
    assert _errors(tmp_path) == [f"{ERROR}interrupted by SIGINT; {kept}"]
    assert read_meta(out)["status"] == "interrupted" and not (out / DOCTOR_JSON).exists()


def test_a_doctor_interrupted_after_its_configuration_phase_keeps_its_config_verdict(tmp_path):
    """A golden configuration no host matches (torch 9.9.9), and rank 0 held at the start of the first
    measurement: the Ctrl-C lands after the configuration phase named the host, and doctor.json keeps that
    verdict with status interrupted."""
    out, golden = tmp_path / "run", tmp_path / "golden.json"
    golden.write_text(json.dumps({"torch": "9.9.9"}))
    proc = _start(["doctor", "--no-plot",
                   "--workers", "2", "--expect-config", str(golden), "--out", str(out)], tmp_path,
                  {"NCCL_BENCH_FAULT": "stall:0:0"})
    code = _interrupt_when(proc, lambda: "expected 9.9.9" in (tmp_path / "stdout.txt").read_text())
    assert code == 130, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert _errors(tmp_path) == [f"{ERROR}interrupted by SIGINT; what was measured so far is kept in {out}"]
    doctor = json.loads((out / DOCTOR_JSON).read_text())
    assert (doctor["status"], read_meta(out)["status"]) == ("interrupted", "interrupted")
    assert [suspect["kind"] for suspect in doctor["suspects"]] == ["config"]
    assert any(note.startswith("the run interrupted during ") and "these verdicts come from the configuration "
               "phase's facts and the 0 result(s) measured before it" in note for note in doctor["notes"])


def test_an_interrupt_before_the_sweep_began_leaves_no_folder(tmp_path):
    out = tmp_path / "run"
    proc = _start([*SWEEP, "--out", str(out)], tmp_path)
    try:
        wait_for(lambda: out.is_dir(), 120, proc=proc)  # made by the command, before any rank measured
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, (tmp_path / "stderr.txt").read_text()[-3000:]
    errors = _errors(tmp_path)
    if out.exists():  # the ranks were quicker than the signal: then the rows are kept instead
        assert errors == [
            f"{ERROR}interrupted by SIGTERM; the {len(read_rows(out))} row(s) measured so far are kept in {out}"
        ]
    else:
        assert errors == [f"{ERROR}interrupted by SIGTERM before the sweep began; nothing was measured"]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rendezvous_nobody_answers_is_one_line_naming_address_port_and_timeout(tmp_path, rank):
    """Rank 1 cannot reach the store (nothing listens): the rendezvous's address, port and wait. Rank 0
    holds the store and waits for rank 1 alone: the rank that never joined."""
    port = free_port()
    env = {"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot", "--sizes", "1K", "--timeout", "1", "--out", str(out)], env=env, timeout=120)
    assert result.returncode == EXIT_RUN_FAILED
    assert "Traceback" not in result.stderr and "frame #" not in result.stderr
    [line] = result.stderr.splitlines()
    if rank == 0:
        assert line == (f"{ERROR}setting up the sweep failed: rank 1 never joined (1 of 2 did); rank 0 saw: joining "
                        "the rendezvous made no progress for more than 1 s (--timeout 1 s)")
    else:
        assert line.startswith(
            f"{ERROR}rendezvous at MASTER_ADDR=127.0.0.1 MASTER_PORT={port} failed on rank 1 within --timeout 1 s (")
        assert line.endswith("); check that address and port, and that every rank started")
    assert not out.exists()


def test_an_endless_cycles_run_interrupted_keeps_every_finished_cycle_s_rows(tmp_path):
    out = tmp_path / "run"
    proc = _start(["sweep", "--no-plot",
                   "--workers", "2", "--op", "all_reduce", "--sizes", "1K", "--iters", "2", "--warmup", "0",
                   "--cycles", "0", "--out", str(out)], tmp_path)
    code = _interrupt_after_rows(proc, out, 3, lambda: os.killpg(proc.pid, signal.SIGINT))
    rows = read_rows(out)
    assert code == 130 and read_meta(out)["status"] == "interrupted"
    assert [r.cycle for r in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 3
    assert _errors(tmp_path) == [
        f"{ERROR}interrupted by SIGINT; the {len(rows)} row(s) measured so far are kept in {out}"]
    assert "# cycle 3 (until interrupted)" in (tmp_path / "stdout.txt").read_text()
