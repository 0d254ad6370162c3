"""The one run life cycle (ranks/session.py), driven with a fake body and no process group.

Every command on ranks (sweep, doctor) goes through it, so these tests hold for both: the final
meta.json is written once with a true status whatever ends the run, a signal while a row is recorded
is raised after it lands, and the device a rank uses is chosen the same way for every command.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.ranks import faults, roll_call, run_facts, session
from nccl_bench.ranks.layout import LaunchEnv
from nccl_bench.ranks.set_up import SetUp
from nccl_bench.results.run_folder import read_meta
from nccl_bench.sweep import sweep_body, sweep_report


def _sigterm_self(*_args) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before this call returns


class _Body:
    """A RunBody that records what the life cycle asked of it; `during` runs inside measure."""

    where = "the fake body"

    def __init__(self, during=lambda: None, on_close=lambda: None):
        self.during, self.on_close, self.calls, self.closed_with = during, on_close, [], []

    def set_up(self, run):
        self.calls.append("set_up")

    def meta(self):
        return {"body_key": 1}

    def measure(self, run):
        self.calls.append("measure")
        self.during()

    def close(self, status):
        self.closed_with.append(status)
        self.on_close()
        return {"final_key": status}

    def finished(self, status):
        self.calls.append(f"finished:{status}")


def _request(tmp_path: Path, backend: str = "gloo") -> session.RunRequest:
    return session.RunRequest(command="sweep", backend=backend, timeout_s=5.0, out=tmp_path,
                              results_root=tmp_path, folder_label=("all_reduce",), bytes_per_rank=1024,
                              size_option="--sizes", config={"k": "v"})


def _life(tmp_path, monkeypatch, body) -> session.Run:
    """The life cycle on rank 0 of a world of one, with no process group and no store."""
    launch = LaunchEnv("torchrun", 0, 1, 0, 1, "127.0.0.1", "1")
    run = session.Run(_request(tmp_path), launch, tmp_path)
    run.ctx = SimpleNamespace(rank=0, world_size=1, error_handling=None, star=None)
    run.set_up = SetUp()
    monkeypatch.setattr(session._LifeCycle, "_describe", lambda self: None)
    monkeypatch.setattr(roll_call, "mark_leaving", lambda ctx, why=None: None)
    monkeypatch.setattr(roll_call, "local_peer_states", lambda ctx: {})
    with faults.signals_raise_interrupted():
        session._LifeCycle(run, body, None).go()
    return run


def test_a_complete_run_writes_common_and_body_keys_once(tmp_path, monkeypatch):
    body = _Body()
    run = _life(tmp_path, monkeypatch, body)
    meta = read_meta(tmp_path)
    assert run.status == "complete" and meta["status"] == "complete" and meta["command"] == "sweep"
    assert meta["body_key"] == 1 and meta["final_key"] == "complete" and meta["config"] == {"k": "v"}
    assert {"env", "versions", "hostnames", "devices", "started_utc", "ended_utc"} <= meta.keys()
    assert body.calls == ["set_up", "measure", "finished:complete"] and body.closed_with == ["complete"]


def test_a_signal_after_the_last_result_still_leaves_a_complete_run(tmp_path, monkeypatch):
    body = _Body(on_close=_sigterm_self)
    _life(tmp_path, monkeypatch, body)
    assert read_meta(tmp_path)["status"] == "complete" and body.calls[-1] == "finished:complete"


def test_a_signal_while_measuring_ends_it_as_interrupted(tmp_path, monkeypatch):
    body = _Body(during=_sigterm_self)
    with pytest.raises(faults.Interrupted):
        _life(tmp_path, monkeypatch, body)
    assert read_meta(tmp_path)["status"] == "interrupted" and body.closed_with == ["interrupted"]
    assert body.calls[-1] == "finished:interrupted"


def test_a_failure_while_measuring_ends_it_as_failed_naming_the_step(tmp_path, monkeypatch):
    def fail():
        raise RuntimeError("Connection closed by peer")

    body = _Body(during=fail)
    with pytest.raises(Exception, match="the fake body failed on rank 0: Connection closed by peer"):
        _life(tmp_path, monkeypatch, body)
    assert read_meta(tmp_path)["status"] == "failed" and body.closed_with == ["failed"]


def test_a_signal_while_a_row_is_recorded_is_raised_after_the_table_shows_it():
    rows_seen = []
    observer = SimpleNamespace(row_done=rows_seen.append)
    summary, row = sweep_report.SweepSummary(run_dir=None), object()
    writer = SimpleNamespace(append=_sigterm_self)
    with faults.signals_raise_interrupted():
        with pytest.raises(faults.Interrupted, match="SIGTERM"):
            sweep_body.record_row(row, summary, writer, observer)
    assert summary.rows == [row] and rows_seen == [row]


def _fake_gpus(monkeypatch, count: int, free_bytes: int = 80 << 30) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index: (free_bytes, free_bytes))


def test_every_command_uses_cuda_0_under_srun_gpus_per_task(tmp_path, monkeypatch):
    """srun --gpus-per-task 1: each task sees its own GPU as cuda:0, whatever its local rank."""
    _fake_gpus(monkeypatch, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    launch = LaunchEnv("slurm", 5, 8, 5, 8, "node1", "29500")
    for command in ("sweep", "doctor"):
        request = session.RunRequest(command, "nccl", 5.0, None, tmp_path, (command,), 1024, "--size", {})
        assert session._device_index(request, launch) == 0


def test_torchrun_uses_cuda_local_rank_and_a_full_gpu_is_refused_naming_the_option(tmp_path, monkeypatch):
    _fake_gpus(monkeypatch, 8, free_bytes=1 << 20)
    launch = LaunchEnv("torchrun", 3, 8, 3, 8, "h", "1")
    small = session.RunRequest("doctor", "nccl", 5.0, None, tmp_path, ("doctor",), 1024, "--size", {})
    assert session._device_index(small, launch) == 3
    large = session.RunRequest("doctor", "nccl", 5.0, None, tmp_path, ("doctor",), 1 << 30, "--size", {})
    with pytest.raises(UserInputError, match=r"^--size: the doctor needs 1,024 MiB of GPU 3 memory"):
        session._device_index(large, launch)


def test_recorded_environment_is_nccl_and_torch_nccl_only():
    from nccl_bench.history.address import ENV_VAR

    environ = {"NCCL_VERSION": "2.28.3-1", "NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
               "TORCH_FR_BUFFER_SIZE": "0", "TORCH_DISTRIBUTED_DEBUG": "OFF", "HF_TOKEN": "secret", "PATH": "/bin",
               ENV_VAR: "postgresql://ci:secret@db/bench",  # the store's URL: no NCCL setting
               "NCCL_BENCH_FAULT": "stall:1"}  # nccl_bench's own variables set nothing in NCCL
    assert run_facts.recorded_env(environ) == {"NCCL_DEBUG": "INFO", "NCCL_VERSION": "2.28.3-1",
                                           "TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}




def test_a_process_group_that_cannot_start_keeps_what_the_backend_said(tmp_path, monkeypatch):
    import contextlib

    from nccl_bench.errors import RunFailedError
    from nccl_bench.ranks import dist

    said = ("h:1:2 [0] NCCL WARN socketStartConnect: Connect to 10.0.0.1<43211> failed",
            "Last error: socketStartConnect: Connect to 10.0.0.1<43211> failed")

    @contextlib.contextmanager
    def failing_group(*args, **kwargs):
        raise dist.BackendStartError("NCCL error in: NCCLUtils.cpp:77, unhandled system error\nLast error:", said)
        yield

    monkeypatch.setattr(session, "require_launch", lambda: LaunchEnv("torchrun", 0, 1, 0, 1, "127.0.0.1", "1"))
    monkeypatch.setattr(session, "_device_index", lambda request, launch: None)
    monkeypatch.setattr(session, "export_launch_env", lambda launch: None)
    monkeypatch.setattr(dist, "process_group", failing_group)
    with pytest.raises(RunFailedError) as info:
        session.execute(_request(tmp_path / "run"), _Body())
    assert str(info.value) == ("setting up the sweep failed on rank 0: NCCL error in: NCCLUtils.cpp:77, "
                               "unhandled system error")
    assert info.value.details == said and not (tmp_path / "run").exists()
