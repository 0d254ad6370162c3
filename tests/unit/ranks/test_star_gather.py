"""ranks/star_gather.py: ranks as threads of this process on 127.0.0.1 gather objects at rank 0's socket;
a rank that never joins or never sends is named in one line by every rank, within --timeout."""

from __future__ import annotations

import pickle
import threading

import pytest

from nccl_bench.doctor.config_check import Fact
from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import star_gather
from nccl_bench.ranks.layout import LaunchEnv
from tests.helpers.ports import free_port

TIMEOUT_S = 2.0  # a thread's join and gather on 127.0.0.1 take milliseconds


def _ranks(world: int, port: int, present: list[int], body) -> dict[int, object]:
    """Run body(gather) on a thread per present rank; each rank's result or the exception it raised."""
    said: dict[int, object] = {}

    def rank(index: int) -> None:
        launch = LaunchEnv("mpirun", index, world, index, world, "127.0.0.1", str(port))
        gather = star_gather.StarGather(launch, TIMEOUT_S, "setting up the doctor")
        try:
            gather.join()
            said[index] = body(gather, index)
        except RunFailedError as exc:
            said[index] = exc
        finally:
            gather.close()

    threads = [threading.Thread(target=rank, args=(index,)) for index in present]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=4 * TIMEOUT_S)
    assert not any(thread.is_alive() for thread in threads)
    return said


def test_every_rank_gets_every_rank_s_object_in_rank_order_twice():
    said = _ranks(3, free_port(), [0, 1, 2], lambda gather, rank: (
        gather.all_gather(("host", rank), "its host name"), gather.all_gather(Fact(str(rank), "environment"), "facts")))
    expected = ([("host", 0), ("host", 1), ("host", 2)], [Fact("0", "environment"), Fact("1", "environment"),
                                                          Fact("2", "environment")])
    assert said == {0: expected, 1: expected, 2: expected}


def test_a_rank_that_never_joins_is_named_by_every_rank_that_did():
    said = _ranks(3, free_port(), [0, 1], lambda gather, rank: gather.all_gather(rank, "its host name"))
    line = ("setting up the doctor failed: rank 2 never joined (2 of 3 did); rank 0 saw: joining made no progress "
            "for more than 2 s (--timeout 2 s)")
    assert {rank: str(exc) for rank, exc in said.items()} == {0: line, 1: line}


def test_a_rank_that_joins_but_never_sends_is_named_with_what_it_never_sent():
    def body(gather, rank):
        if rank == 2:
            return None  # leaves without sending: its connection closes
        return gather.all_gather(rank, "its host's facts")

    said = _ranks(3, free_port(), [0, 1, 2], body)
    line = "setting up the doctor failed: rank 2 never sent its host's facts (2 of 3 did) within --timeout 2 s"
    assert (str(said[0]), str(said[1]), said[2]) == (line, line, None)


def test_a_rank_whose_rank_zero_never_listens_names_its_address():
    port = free_port()
    said = _ranks(2, port, [1], lambda gather, rank: None)
    assert str(said[1]).startswith(f"setting up the doctor failed: rank 0 at MASTER_ADDR=127.0.0.1 MASTER_PORT={port} "
                                   "never answered rank 1 within --timeout 2 s")


def test_a_peer_s_bytes_rebuild_nccl_bench_s_classes_and_plain_containers_only():
    assert star_gather.loads(pickle.dumps({"driver": Fact("580.65.06", "nvidia-smi -q"), "n": (1, 2.0)})) == {
        "driver": Fact("580.65.06", "nvidia-smi -q"), "n": (1, 2.0)}

    class Runs:
        def __reduce__(self):
            return (print, ("ran",))

    with pytest.raises(pickle.UnpicklingError, match="builtins.print is not a fact's type"):
        star_gather.loads(pickle.dumps(Runs()))
