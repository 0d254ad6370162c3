"""ranks/star_gather.py: ranks as threads of this process on 127.0.0.1 gather objects at rank 0's socket;
a rank that never joins or never sends is named in one line by every rank, within --timeout."""

from __future__ import annotations

import pickle
import socket
import threading
import time

import pytest

from nccl_bench.doctor.config_check import Fact
from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import star_gather
from nccl_bench.ranks.layout import LaunchEnv
from tests.helpers.ports import free_port

TIMEOUT_S = 2.0  # a thread's join and gather on 127.0.0.1 take milliseconds


def _rank(world: int, port: int, index: int, body, said: dict[int, object]) -> threading.Thread:
    """A started thread that is rank `index`: it joins, then said[index] = body(gather, index), or the
    RunFailedError it raised."""
    def rank() -> None:
        launch = LaunchEnv("mpirun", index, world, index, world, "127.0.0.1", str(port))
        gather = star_gather.StarGather(launch, TIMEOUT_S, "setting up the doctor")
        try:
            gather.join()
            said[index] = body(gather, index)
        except RunFailedError as exc:
            said[index] = exc
        finally:
            gather.close()

    thread = threading.Thread(target=rank)
    thread.start()
    return thread


def _ended(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=4 * TIMEOUT_S)
    assert not any(thread.is_alive() for thread in threads)


def _ranks(world: int, port: int, present: list[int], body) -> dict[int, object]:
    """Run body(gather) on a thread per present rank; each rank's result or the exception it raised."""
    said: dict[int, object] = {}
    _ended([_rank(world, port, index, body, said) for index in present])
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


def test_a_stray_connection_is_not_taken_for_a_rank():
    """Another job's rank, or a port scan, connects to rank 0's port first and says something else: rank 0
    closes it (the stray reads the end) and still waits for its own rank 1."""
    port, said = free_port(), {}
    gather = lambda gather, rank: gather.all_gather(rank, "its host name")  # noqa: E731
    threads = [_rank(2, port, 0, gather, said)]
    for hello in (b"GET / HTTP/1.0\r\n\r\n", star_gather._hello(5, 1), star_gather._hello(2, 0), b""):
        conn = _connected(port)
        conn.sendall(star_gather.FRAME.pack(star_gather.DATA, len(hello)) + hello)
        conn.settimeout(TIMEOUT_S)
        assert conn.recv(1) == b"", hello  # rank 0 closed it
        conn.close()
    threads.append(_rank(2, port, 1, gather, said))
    _ended(threads)
    assert said == {0: [0, 1], 1: [0, 1]}


def _connected(port: int) -> socket.socket:
    """A connection to rank 0's port, once it listens."""
    limit = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        except OSError:
            if time.monotonic() > limit:
                raise
            time.sleep(0.01)


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


@pytest.mark.parametrize("module, name", [
    ("nccl_bench.ranks.star_gather", "socket.socket"),  # a dotted name walks into a module nccl_bench imported
    ("nccl_bench.ranks.star_gather", "socket"),  # a module, not a class
    ("nccl_bench.ranks.star_gather", "loads"),  # a function of nccl_bench's, not a class
    ("nccl_bench.ranks.star_gather", "Any"),  # a name imported into nccl_bench, defined elsewhere
])
def test_a_name_that_reaches_past_nccl_bench_s_own_classes_is_refused(module, name):
    """Protocol 4 pickles may name `module.attr.attr`: without this, `os.system` through any nccl_bench
    module that imports os would be callable from a peer's bytes."""
    opcodes = b"\x80\x04\x95" + b"\x00" * 8  # PROTO 4, FRAME (length unused by the loader's checks)
    payload = b"\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + bytes([len(name)]) + name.encode()
    data = opcodes + payload + b"\x93."  # SHORT_BINUNICODE x2, STACK_GLOBAL, STOP
    with pytest.raises(pickle.UnpicklingError, match="is not a fact's type"):
        star_gather.loads(data)
