"""Threads started at once on one shared resource: what each got, or the one-line refusal it met."""

from __future__ import annotations

import threading
from typing import Any, Callable

from nccl_bench.errors import UserInputError


def race(count: int, act: Callable[[int], Any]) -> list:
    """act(i) in `count` threads that start together (a barrier); each one's result or UserInputError."""
    barrier, outcomes = threading.Barrier(count), [None] * count

    def one(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = act(i)
        except UserInputError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
