"""Processes a test starts and watches: alive or gone, a launcher's ranks, a condition waited for."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent's wait (init reaps orphans)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def wait_for(condition: Callable[[], object], timeout: float, what: str = "the condition",
             proc: subprocess.Popen | None = None) -> None:
    """Return once condition() holds; fail after `timeout` seconds, or as soon as `proc` has ended."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what} never held (exit {proc.poll()})")
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f}s for {what}")
        time.sleep(0.05)


def ended_by(procs: dict[int, subprocess.Popen], by: float) -> list[int]:
    """Wait for every rank until the monotonic time `by`; the ranks still running then, killed."""
    late = []
    for rank, proc in procs.items():
        try:
            proc.wait(timeout=max(0.0, by - time.monotonic()))
        except subprocess.TimeoutExpired:
            late.append(rank)
            proc.kill()
            proc.wait()
    return late


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (a launcher's workers)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def rank_of(pid: int) -> int | None:
    """The RANK a worker process was started with, from its environment."""
    try:
        for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if entry.startswith(b"RANK="):
                return int(entry[5:])
    except OSError:
        return None
    return None


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` processes that spin a core each while the block runs: the load that error rates are
    measured beside (benchmarks/RESULTS.md, "beside two busy loops")."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
