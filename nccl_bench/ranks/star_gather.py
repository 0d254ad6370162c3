"""A gather of small objects among the ranks over TCP, without torch: rank 0 serves MASTER_PORT, every
other rank connects to it once, and each gather is one message from every rank to rank 0 and the
whole list back (a star: 2(N-1) messages; the facts of a configuration check are a few KiB per host).

For a run that measures nothing (`doctor --config-only`) where rank 0 owns MASTER_PORT (srun, mpirun,
RANK/WORLD_SIZE set by hand): torch's import is most of such a run at scale (ranks/session.py). Under
torchrun the elastic agent owns MASTER_PORT with its TCPStore, and the run takes the process group.

Every wait has --timeout (the join: from the last rank that joined, as the process group's rendezvous
waits): rank 0 names the ranks that never joined or never sent, in one line, and
tells the ranks still connected the same line; a rank that cannot reach rank 0, or that rank 0 stops
answering, names rank 0's address. Objects travel pickled, as torch's all_gather_object sends them;
only nccl_bench's own classes and plain containers are rebuilt on arrival (RestrictedUnpickler).
"""

from __future__ import annotations

import contextlib
import io
import pickle
import selectors
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from nccl_bench.errors import RunFailedError
from nccl_bench.ranks import devices, dist, faults
from nccl_bench.ranks.layout import DEFAULT_MASTER_PORT, LaunchEnv
from nccl_bench.ranks.native_output import backend_error_text
from nccl_bench.ranks.set_up import named_ranks, never_joined

FRAME = struct.Struct("!BQ")  # kind, payload length in bytes
DATA, FAILED = 0, 1
HELLO = "nccl_bench star gather 1"  # a joining rank's first words (format 1), then the world's size and its rank
CONNECT_RETRY_S = 0.05  # between refused connects: rank 0 may not be listening yet
# Plain containers a fact is made of; anything else must be one of nccl_bench's classes.
SAFE_BUILTINS = frozenset({"tuple", "list", "dict", "set", "frozenset", "str", "int", "float", "bool", "bytes"})
# NCCL's diagnostics reports (NCCL >= 2.31), printed as its communicator starts: a run that asks for them
# needs one (results/nccl_diag.py).
NCCL_DIAGNOSTICS_ENV = ("NCCL_RUN_DIAGNOSTICS", "NCCL_RUN_RAS_DIAGNOSTICS")


def serves(measures: bool, environ: Mapping[str, str]) -> bool:
    """A run goes without torch where it measures nothing, rank 0 owns MASTER_PORT (srun, mpirun, RANK and
    WORLD_SIZE set by hand) and NCCL's diagnostics are not asked for. Under torchrun's elastic agent
    (TORCHELASTIC_RUN_ID) the agent's TCPStore holds the port, and the ranks meet in it through torch
    (docs/doctor.md says why they do not speak its protocol)."""
    return (not measures and "TORCHELASTIC_RUN_ID" not in environ
            and not any(environ.get(name) for name in NCCL_DIAGNOSTICS_ENV))


@contextlib.contextmanager
def opened(launch: LaunchEnv, backend: str, timeout_s: float, command: str) -> Iterator[dist.DistContext]:
    """The ranks joined at rank 0's socket (every wait --timeout), as the context a run's body sees."""
    gather = StarGather(launch, timeout_s, f"setting up the {command}")
    try:
        gather.join()
        kind = devices.device_kind(backend)
        device = HostDevice(kind, launch.local_rank if kind == "cuda" else None)
        yield dist.DistContext(launch.rank, launch.world_size, launch.local_rank, backend, device, timeout_s,
                               star=gather)
    finally:
        gather.close()


def failure(exc: BaseException, rank: int, where: str) -> BaseException:
    """What ended a rank without a process group: exc itself where it says why (an interrupt, a line of
    the star's), else where it happened, on which rank, and what it saw."""
    if isinstance(exc, (faults.Interrupted, RunFailedError)):
        return exc
    return RunFailedError(f"{where} failed on rank {rank}: {backend_error_text(exc)}")


@dataclass(frozen=True)
class HostDevice:
    """What torch.device says of a rank's device (its type, its index), without torch."""

    type: str
    index: int | None = None


class RestrictedUnpickler(pickle.Unpickler):
    """Rebuilds nccl_bench's classes and plain containers only: a peer's bytes never name code to run."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in SAFE_BUILTINS:
            return super().find_class(module, name)
        if module.startswith("nccl_bench.") and "." not in name:  # a dotted name reaches through attributes
            found = super().find_class(module, name)
            # a class written in nccl_bench, not a function or a module it imported (os, subprocess)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not a fact's type")


def loads(data: bytes) -> Any:
    return RestrictedUnpickler(io.BytesIO(data)).load()


class StarGather:
    """One rank's end of the star, open from join() to close()."""

    def __init__(self, launch: LaunchEnv, timeout_s: float, what: str):
        self.rank, self.world_size, self.timeout_s = launch.rank, launch.world_size, timeout_s
        self.address = (launch.master_addr or "127.0.0.1", int(launch.master_port or DEFAULT_MASTER_PORT))
        self.what = what  # "setting up the doctor": the failure's first words
        self.peers: dict[int, socket.socket] = {}  # rank 0: every other rank's connection
        self.buffers: dict[socket.socket, bytearray] = {}  # rank 0: what each has sent and it has not read
        self.server: socket.socket | None = None
        self.to_root: socket.socket | None = None

    # -- joining ---------------------------------------------------------------------------------
    def join(self) -> None:
        """Every rank connected to rank 0 (rank 0: until every rank has, or --timeout passed)."""
        if self.rank == 0:
            self._accept_all()
        elif self.world_size > 1:
            self._connect()
            _send(self.to_root, DATA, _hello(self.world_size, self.rank))

    def _accept_all(self) -> None:
        self.server = socket.create_server(("", self.address[1]))
        hellos: dict[socket.socket, bytearray] = {}
        with selectors.DefaultSelector() as selector:
            selector.register(self.server, selectors.EVENT_READ)
            limit = time.monotonic() + self.timeout_s
            while len(self.peers) < self.world_size - 1 and (left := limit - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    if key.fileobj is self.server:
                        conn, _ = self.server.accept()
                        hellos[conn] = bytearray()
                        selector.register(conn, selectors.EVENT_READ)
                        continue
                    conn = key.fileobj
                    frame = _read_some(conn, hellos[conn])
                    if frame is None:
                        continue
                    selector.unregister(conn)
                    buffered = hellos.pop(conn)
                    if frame is False:
                        conn.close()
                        continue
                    rank = _hello_rank(frame, self.world_size, self.peers)
                    if rank is None:  # a stray connection (another job's rank, a port scan): not one of ours
                        conn.close()
                        continue
                    self.peers[rank] = conn
                    self.buffers[conn] = buffered  # what the rank sent after its hello: its first gather's part
                    limit = time.monotonic() + self.timeout_s  # --timeout from the last rank that joined
        for conn in hellos:
            conn.close()
        never = [r for r in range(1, self.world_size) if r not in self.peers]
        if never:
            self._fail(f"{never_joined(never, self.world_size)}; rank 0 saw: joining made no progress for more "
                       f"than {self.timeout_s:g} s (--timeout {self.timeout_s:g} s)")

    def _connect(self) -> None:
        limit, why = time.monotonic() + self.timeout_s, "no answer"
        while (left := limit - time.monotonic()) > 0:
            try:
                self.to_root = socket.create_connection(self.address, timeout=left)
                return
            except OSError as exc:
                why = exc.strerror or str(exc)
                time.sleep(min(CONNECT_RETRY_S, max(0.0, limit - time.monotonic())))
        host, port = self.address
        raise RunFailedError(f"{self.what} failed: rank 0 at MASTER_ADDR={host} MASTER_PORT={port} never answered "
                             f"rank {self.rank} within --timeout {self.timeout_s:g} s ({why}); check that address "
                             "and port, and that rank 0 started")

    # -- gathering -------------------------------------------------------------------------------
    def all_gather(self, obj: Any, what: str) -> list[Any]:
        """Every rank's obj, in rank order, on every rank. what: the gather's name in a failure."""
        if self.rank != 0:
            return self._ask(obj, what)
        got = {0: obj}
        rank_of = {conn: rank for rank, conn in self.peers.items()}
        with selectors.DefaultSelector() as selector:
            for conn, rank in rank_of.items():
                frame = _take_frame(self.buffers[conn])
                if frame is not None:
                    got[rank] = self._part(frame, rank, what)
                else:
                    selector.register(conn, selectors.EVENT_READ)
            limit = time.monotonic() + self.timeout_s
            while len(got) < self.world_size and (left := limit - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    frame = _read_some(key.fileobj, self.buffers[key.fileobj])
                    if frame is None:
                        continue
                    selector.unregister(key.fileobj)
                    if frame is not False:
                        got[rank_of[key.fileobj]] = self._part(frame, rank_of[key.fileobj], what)
        silent = [r for r in range(self.world_size) if r not in got]
        if silent:
            self._fail(f"{named_ranks(silent)} never sent {what} ({len(got)} of {self.world_size} did) within "
                       f"--timeout {self.timeout_s:g} s")
        every = [got[r] for r in range(self.world_size)]
        payload = pickle.dumps(every)
        for conn in self.peers.values():
            _send(conn, DATA, payload)
        return every

    def _part(self, frame: tuple[int, bytes], rank: int, what: str) -> Any:
        try:
            return loads(frame[1])
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as exc:
            self._fail(f"rank {rank} sent {what} that could not be read ({exc})")

    def _ask(self, obj: Any, what: str) -> list[Any]:
        host, port = self.address
        lost = (f"{self.what} failed: rank 0 at {host}:{port} stopped answering rank {self.rank} while gathering "
                f"{what}")
        try:
            _send(self.to_root, DATA, pickle.dumps(obj))
            # rank 0 waits up to --timeout for the slowest rank, then answers: twice that, and rank 0 is gone
            self.to_root.settimeout(2 * self.timeout_s)
            kind, payload = _read_frame(self.to_root)
        except (OSError, EOFError) as exc:
            raise RunFailedError(f"{lost} ({exc or 'connection closed'})") from None
        if kind == FAILED:
            raise RunFailedError(payload.decode(errors="replace"))
        return loads(payload)

    def _fail(self, reason: str) -> None:
        """Rank 0's failure: said to every rank still connected, then raised here."""
        line = f"{self.what} failed: {reason}"
        for conn in self.peers.values():
            try:
                conn.settimeout(1.0)
                _send(conn, FAILED, line.encode())
            except OSError:
                pass
        raise RunFailedError(line)

    def close(self) -> None:
        for conn in [*self.peers.values(), self.to_root, self.server]:
            if conn is not None:
                conn.close()
        self.peers, self.buffers, self.to_root, self.server = {}, {}, None, None


def _hello(world_size: int, rank: int) -> bytes:
    """A rank's first message: who it is, in a world of how many (a rank of another run is told apart)."""
    return f"{HELLO} {world_size} {rank}".encode()


def _hello_rank(frame: tuple[int, bytes], world_size: int, taken: Mapping[int, Any]) -> int | None:
    """The rank a first message names, or None for one that is not a rank of this world (or one already here)."""
    words = frame[1].decode(errors="replace").rsplit(" ", 2)
    if frame[0] != DATA or len(words) != 3 or words[0] != HELLO or words[1] != str(world_size):
        return None
    rank = int(words[2]) if words[2].isdigit() else 0
    return rank if 0 < rank < world_size and rank not in taken else None


def _send(conn: socket.socket, kind: int, payload: bytes) -> None:
    conn.sendall(FRAME.pack(kind, len(payload)) + payload)


def _read_some(conn: socket.socket, buffer: bytearray) -> tuple[int, bytes] | None | bool:
    """Read what a ready connection has into its buffer: the first whole frame (taken out of the buffer),
    None until there is one, False when it closed first."""
    try:
        chunk = conn.recv(1 << 16)
    except OSError:
        return False
    if not chunk:
        return False
    buffer += chunk
    return _take_frame(buffer)


def _take_frame(buffer: bytearray) -> tuple[int, bytes] | None:
    """The buffer's first whole frame, removed from it; None while it is incomplete."""
    if len(buffer) < FRAME.size:
        return None
    kind, length = FRAME.unpack_from(buffer)
    if len(buffer) < FRAME.size + length:
        return None
    payload = bytes(buffer[FRAME.size:FRAME.size + length])
    del buffer[:FRAME.size + length]
    return kind, payload


def _read_frame(conn: socket.socket) -> tuple[int, bytes]:
    kind, length = FRAME.unpack(_read_exactly(conn, FRAME.size))
    return kind, _read_exactly(conn, length)


def _read_exactly(conn: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return bytes(data)
