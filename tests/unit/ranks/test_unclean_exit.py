"""Every unclean exit from the process group aborts it, never destroys it: on NCCL a destroy waits for
kernels that peers stopped at other op counts never launch, and the report would be lost."""

from __future__ import annotations

import os
import threading
import time

import pytest

from nccl_bench.ranks import dist as rank_dist
from nccl_bench.ranks.faults import Interrupted
from nccl_bench.ranks.layout import LaunchEnv
from nccl_bench.ranks.set_up import SetUp
from tests.helpers.ports import free_port


@pytest.fixture(autouse=True)
def _environment_restored():
    """process_group exports the launch layout (RANK, WORLD_SIZE, MASTER_ADDR): later tests must not see it."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def blocking_destroy(monkeypatch):
    """destroy_process_group that blocks, as NCCL's does when peers are at other op counts."""
    import torch.distributed as tdist

    calls, real = [], tdist.destroy_process_group
    forever = threading.Event()

    def destroy(group=None):
        calls.append(group)
        if len(calls) == 1 and not forever.wait(60):
            raise AssertionError("destroy was called on an unclean exit")
        return real(group)

    monkeypatch.setattr(tdist, "destroy_process_group", destroy)
    yield calls
    forever.set()
    if tdist.is_initialized():  # the aborted world, forgotten by torch's abort where it has one
        real()


def _launch() -> LaunchEnv:
    return LaunchEnv(rank=0, world_size=1, local_rank=0, local_world_size=1, launcher="torchrun",
                     master_addr="127.0.0.1", master_port=str(free_port()))


@pytest.mark.parametrize("stop", [RuntimeError("Connection reset by peer"), Interrupted("SIGTERM")])
def test_unclean_exit_aborts_instead_of_destroying(blocking_destroy, stop):
    started = time.monotonic()
    with pytest.raises(type(stop)):
        with rank_dist.process_group(_launch(), "gloo", 30.0, control=True, set_up=SetUp()):
            raise stop
    assert blocking_destroy == []  # never destroyed
    assert time.monotonic() - started < 20  # out at once: the report is printed after this
    assert rank_dist._aborted.done


def test_a_clean_exit_destroys(monkeypatch):
    import torch.distributed as tdist

    calls, real = [], tdist.destroy_process_group
    monkeypatch.setattr(tdist, "destroy_process_group", lambda group=None: (calls.append(group), real(group)))
    with rank_dist.process_group(_launch(), "gloo", 30.0, set_up=SetUp()):
        pass
    assert calls == [None] and not tdist.is_initialized()
