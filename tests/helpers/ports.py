"""A TCP port for a rendezvous outside any private network namespace."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that no socket holds now: the kernel's pick for a bind to port 0."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
