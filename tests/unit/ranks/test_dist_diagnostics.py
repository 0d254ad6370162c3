"""What NCCL says when its communicator cannot start is kept: the held stderr, filtered, and the
rendezvous's wait named as long as it really was."""

from __future__ import annotations

import os

import pytest

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import dist
from nccl_bench.ranks.layout import LaunchEnv

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
    assert dist.backend_diagnostics(NCCL_STDERR + TORCH_ERROR) == (
        "node2:3141:3160 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<43211> failed : "
        "Software caused connection abort",
        "node2:3141:3160 [0] NCCL WARN ?[31mbootstrap.cc:90 failed?[0m",
        "Last error: socketStartConnect: Connect to 10.0.0.1<43211> failed : Software caused connection abort",
    )


def test_nothing_is_kept_from_retry_noise_and_a_long_log_is_capped():
    assert dist.backend_diagnostics("[c10d] The client socket has failed to connect\nframe #3: x\n") == ()
    many = "\n".join(f"h:1:2 [0] NCCL WARN line {i}" for i in range(50))
    kept = dist.backend_diagnostics(many)
    assert len(kept) == dist.MAX_DIAGNOSTICS and kept[0].endswith("line 0")


def test_the_rendezvous_names_the_wait_it_really_had():
    assert dist.waited_text(10, 10) == "within --timeout 10 s"
    assert dist.waited_text(10, 24) == ("within 24 s (--timeout 10 s + 14 s that NCCL's group is given so the "
                                        "rank's deadline acts first)")


def _launch() -> LaunchEnv:
    return LaunchEnv(rank=1, world_size=2, local_rank=0, local_world_size=1, launcher="torchrun",
                     master_addr="127.0.0.1", master_port="29500")


def _failing_init(capfd, monkeypatch, error):
    import torch.distributed as tdist

    def init_process_group(**kwargs):
        os.write(2, NCCL_STDERR.encode())  # as NCCL's C++ writes it: to fd 2, not through sys.stderr
        raise error

    monkeypatch.setattr(tdist, "init_process_group", init_process_group)
    monkeypatch.setattr(dist, "export_launch_env", lambda launch: None)


def test_a_backend_that_fails_to_start_keeps_what_nccl_wrote(capfd, monkeypatch):
    import torch.distributed as tdist

    _failing_init(capfd, monkeypatch, tdist.DistBackendError(TORCH_ERROR))
    with pytest.raises(dist.BackendStartError) as info:
        with dist.process_group(_launch(), "gloo", 5.0):
            pass
    assert info.value.details[0].endswith("Software caused connection abort")
    assert info.value.details[-1].startswith("Last error: socketStartConnect")
    assert capfd.readouterr().err == ""  # held, not printed: the one-line answer carries it


def test_a_failed_rendezvous_carries_nccls_lines_too(capfd, monkeypatch):
    import torch.distributed as tdist

    _failing_init(capfd, monkeypatch, tdist.DistStoreError("Timed out after 6 seconds waiting for clients"))
    with pytest.raises(RunFailedError) as info:
        with dist.process_group(_launch(), "gloo", 5.0):
            pass
    assert "within --timeout 5 s (Timed out after 6 seconds waiting for clients)" in str(info.value)
    assert len(info.value.details) == 2 and capfd.readouterr().err == ""
