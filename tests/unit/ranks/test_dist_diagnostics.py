"""What NCCL says when its communicator cannot start is kept: the held stdout and stderr, filtered,
and the rendezvous's wait named as long as it really was."""

from __future__ import annotations

import os

import pytest

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import dist, native_output, set_up
from nccl_bench.ranks.layout import LaunchEnv
from nccl_bench.ranks.set_up import SetUp

# What a rank writes when NCCL cannot reach a peer (NCCL_DEBUG=WARN) and the error torch raises.
NCCL_STDERR = """\
[W1123 10:00:01.000000000 socket.cpp:752] [c10d] The client socket has failed to connect to [node1]:29500
node2:3141:3160 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
node2:3141:3160 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<43211> failed : \
Software caused connection abort
node2:3141:3160 [0] NCCL WARN \x1b[31mbootstrap.cc:90 failed\x1b[0m
frame #0: c10::Error::Error + 0x9d
"""
TORCH_ERROR = """\
NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error \
(run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
Last error:
socketStartConnect: Connect to 10.0.0.1<43211> failed : Software caused connection abort"""


def test_nccl_warnings_and_the_last_error_are_kept_in_order_without_control_characters():
    assert native_output.backend_diagnostics(NCCL_STDERR + TORCH_ERROR) == (
        "node2:3141:3160 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<43211> failed : "
        "Software caused connection abort",
        "node2:3141:3160 [0] NCCL WARN ?[31mbootstrap.cc:90 failed?[0m",
        "Last error: socketStartConnect: Connect to 10.0.0.1<43211> failed : Software caused connection abort",
    )


def test_nothing_is_kept_from_retry_noise_and_a_long_log_is_capped():
    assert native_output.backend_diagnostics("[c10d] The client socket has failed to connect\nframe #3: x\n") == ()
    many = "\n".join(f"h:1:2 [0] NCCL WARN line {i}" for i in range(50))
    kept = native_output.backend_diagnostics(many)
    assert len(kept) == native_output.MAX_DIAGNOSTICS and kept[0].endswith("line 0")


def test_the_rendezvous_names_the_wait_it_really_had():
    assert dist.waited_text(10, 10) == "within --timeout 10 s"
    assert dist.waited_text(10, 24) == ("within 24 s (--timeout 10 s + 14 s that NCCL's group is given so the "
                                        "rank's deadline acts first)")


def _launch() -> LaunchEnv:
    return LaunchEnv(rank=1, world_size=2, local_rank=0, local_world_size=1, launcher="torchrun",
                     master_addr="127.0.0.1", master_port="29500")


def _failing_init(capfd, monkeypatch, error):
    """The store joined by every rank, then the backend fails to start, saying why on fd 2."""
    import torch.distributed as tdist

    def init_process_group(**kwargs):
        os.write(2, NCCL_STDERR.encode())  # as NCCL's C++ writes it: to fd 2, not through sys.stderr
        raise error

    monkeypatch.setattr(tdist, "init_process_group", init_process_group)
    monkeypatch.setattr(set_up.SetUp, "join_store", lambda self, *args: None)
    monkeypatch.setattr(dist, "export_launch_env", lambda launch: None)


def _failing_rendezvous(capfd, monkeypatch, error):
    """The rendezvous store cannot be reached; torch's client writes its retries on fd 2 meanwhile."""

    def rendezvous_store(launch, timeout):
        os.write(2, NCCL_STDERR.encode())
        raise error

    monkeypatch.setattr(set_up, "rendezvous_store", rendezvous_store)
    monkeypatch.setattr(dist, "export_launch_env", lambda launch: None)


def test_a_backend_that_fails_to_start_keeps_what_nccl_wrote(capfd, monkeypatch):
    import torch.distributed as tdist

    _failing_init(capfd, monkeypatch, tdist.DistBackendError(TORCH_ERROR))
    with pytest.raises(dist.BackendStartError) as info:
        with dist.process_group(_launch(), "gloo", 5.0, set_up=SetUp()):
            pass
    assert info.value.details[0].endswith("Software caused connection abort")
    assert info.value.details[-1].startswith("Last error: socketStartConnect")
    assert capfd.readouterr().err == ""  # held, not printed: the one-line answer carries it


def test_a_failed_rendezvous_carries_nccls_lines_too(capfd, monkeypatch):
    import torch.distributed as tdist

    _failing_rendezvous(capfd, monkeypatch, tdist.DistStoreError("Timed out after 6 seconds waiting for clients"))
    with pytest.raises(RunFailedError) as info:
        with dist.process_group(_launch(), "gloo", 5.0, set_up=SetUp()):
            pass
    assert "within --timeout 5 s (Timed out after 6 seconds waiting for clients)" in str(info.value)
    assert len(info.value.details) == 2 and capfd.readouterr().err == ""


# As NCCL writes them (src/debug.cc: ncclDebugFile is stdout): WARN and INFO lines on fd 1; torch's
# c10d retries on fd 2.
NCCL_STDOUT = """\
node2:3141:3160 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
node2:3141:3160 [0] init.cc:1746 NCCL WARN ncclCommInitRankConfig: invalid device ordinal
"""
C10D_STDERR = "[W1123 10:00:01.000000000 socket.cpp:752] [c10d] The client socket has failed to connect\n"


def _init_writing_as_nccl(monkeypatch, error=None, stdout=NCCL_STDOUT):
    import torch.distributed as tdist

    def init_process_group(**kwargs):
        os.write(1, stdout.encode())  # fd 1 itself, as C stdio writes it, not through sys.stdout
        os.write(2, C10D_STDERR.encode())
        if error is not None:
            raise error

    monkeypatch.setattr(tdist, "init_process_group", init_process_group)
    monkeypatch.setattr(set_up.SetUp, "join_store", lambda self, *args: None)
    monkeypatch.setattr(dist, "export_launch_env", lambda launch: None)


def test_nccls_warnings_on_stdout_are_kept_when_its_communicator_fails(capfd, monkeypatch):
    import torch.distributed as tdist

    _init_writing_as_nccl(monkeypatch, tdist.DistBackendError("NCCL error: invalid usage"))
    with pytest.raises(dist.BackendStartError) as info:
        with dist.process_group(_launch(), "gloo", 5.0, set_up=SetUp()):
            pass
    assert info.value.details == (
        "node2:3141:3160 [0] init.cc:1746 NCCL WARN ncclCommInitRankConfig: invalid device ordinal",)
    assert capfd.readouterr() == ("", "")  # held, not printed: the one-line answer carries it


def test_what_was_written_while_starting_is_passed_on_to_its_own_stream_when_it_starts(capfd, monkeypatch):
    import torch.distributed as tdist

    _init_writing_as_nccl(monkeypatch)
    monkeypatch.setattr(tdist.distributed_c10d, "_get_default_store", lambda: None)
    monkeypatch.setattr(tdist, "destroy_process_group", lambda: None)
    with dist.process_group(_launch(), "gloo", 5.0, set_up=SetUp()):
        pass
    assert capfd.readouterr() == (NCCL_STDOUT, C10D_STDERR)


# NCCL 2.31's diagnostics report as its documentation shows it (docs.nvidia.com/deeplearning/nccl/user-guide/
# docs/troubleshooting/diagnostics.html), printed while the communicator starts, among NCCL's other lines.
DIAG_REPORT = """\
NCCL DIAG === NCCL Diagnostics ===
NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification
NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks
"""


def test_nccls_diagnostics_report_is_kept_for_the_run_and_still_printed(capfd, monkeypatch):
    import torch.distributed as tdist

    _init_writing_as_nccl(monkeypatch, stdout=NCCL_STDOUT + DIAG_REPORT)
    monkeypatch.setattr(tdist.distributed_c10d, "_get_default_store", lambda: None)
    monkeypatch.setattr(tdist, "destroy_process_group", lambda: None)
    with dist.process_group(_launch(), "gloo", 5.0, set_up=SetUp()) as ctx:
        kept = ctx.nccl_diag_lines
    assert kept == tuple(DIAG_REPORT.splitlines())
    assert capfd.readouterr() == (NCCL_STDOUT + DIAG_REPORT, C10D_STDERR)


C_WRITER = """
import ctypes, sys
from nccl_bench.ranks import native_output

libc = ctypes.CDLL(None)
c_stdout = ctypes.c_void_p.in_dll(libc, "stdout")
held = native_output.HeldOutput()
try:
    with held:
        libc.fputs(b"node1:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect failed\\n", c_stdout)
        raise RuntimeError("NCCL could not start")
except RuntimeError:
    pass
sys.stderr.write("held: " + repr(held.text) + "\\n")
"""


def test_c_stdio_flushed_before_held_descriptors_are_restored(tmp_path):
    """NCCL fwrites its WARN lines to C's stdout, which glibc buffers whole when it is a pipe: the line
    must be in what was held, not printed after the descriptors are given back (PYTHONUNBUFFERED unset)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run([sys.executable, "-c", C_WRITER], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "NCCL WARN socketStartConnect failed" in result.stderr  # in held.text
    assert "NCCL WARN" not in result.stdout  # not passed on after the restore
