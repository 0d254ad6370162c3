"""Inside a CUDA graph capture the CPU thread never waits on a send/recv's work (with
TORCH_NCCL_BLOCKING_WAIT=1 that wait queries an event of the capturing stream and breaks the capture);
outside one it waits as always."""

from __future__ import annotations

import pytest

from nccl_bench.ranks import collectives


class _Work:
    def __init__(self, calls: list[str], joins: bool = True):
        self._calls = calls
        if joins:
            self.block_current_stream = lambda: calls.append("block_current_stream")

    def wait(self) -> None:
        self._calls.append("wait")

    def synchronize(self) -> None:
        self._calls.append("synchronize")


@pytest.mark.parametrize(("capturing", "joins", "called"), [
    (False, True, ["wait"]),
    (True, True, ["block_current_stream"]),
    (True, False, ["synchronize"]),  # a torch without block_current_stream
])
def test_the_cpu_waits_only_outside_a_capture(capturing, joins, called):
    calls: list[str] = []
    collectives.finish_work(_Work(calls, joins), capturing)
    assert calls == called


def test_a_cpu_tensor_is_never_in_a_capture():
    import torch

    assert collectives._capture_check(torch.zeros(1))() is False
