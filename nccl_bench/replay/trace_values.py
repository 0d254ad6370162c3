"""A profiler trace's values read as a job could have made them: an event's arguments, integers, rank
lists (as JSON or as the text torch writes), element counts and times, each refused (Impossible) where no
job's trace can hold it, so that no negative, non-finite or impossible number reaches a table or a file."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Protocol

from nccl_bench.replay.trace_vocabulary import dtype_of, is_nccl_kernel

ANNOTATION_PREFIXES = ("nccl:", "gloo:")  # torch's annotations around an NCCL or gloo collective's Work

# torch counts a tensor's elements in int64: a collective of more elements, or of more bytes, is no call
# a job made.
MAX_ELEMENTS = 2**63 - 1


class Impossible(ValueError):
    """A value no job's trace can hold (a negative size, a world of 0 ranks, a NaN duration): the trace is
    refused whole, before anything is measured, so that no such number reaches a table or a file."""


def usable_times(event: dict[str, Any], start: float, duration: float) -> bool:
    """Whether an event's times count. A non-finite time is impossible anywhere; a negative duration is
    impossible for what times a collective (an NCCL kernel, a gloo:* or nccl:* annotation), and any other
    event with one joins nothing, not even the window."""
    if not math.isfinite(start) or not math.isfinite(duration):
        raise Impossible(f"an event's {'ts' if not math.isfinite(start) else 'dur'} is "
                         f"{start if not math.isfinite(start) else duration}")
    if duration >= 0:
        return True
    name = str(event.get("name"))
    if event.get("cat") == "kernel" and is_nccl_kernel(name):
        raise Impossible(f"an NCCL kernel's duration is {duration:g} us")
    if name.startswith(ANNOTATION_PREFIXES):
        raise Impossible(f"the duration of {name} is {duration:g} us")
    return False


def count_at_least(mapping: dict[str, Any], key: str, what: str, least: int) -> int | None:
    """An integer field that must be at least `least` where it is given; None where it is not."""
    value = as_int(mapping.get(key))
    if value is not None and value < least:
        raise Impossible(f"{what} is {value}")
    return value


def elements_of(args: dict[str, Any], key: str, name: str) -> int | None:
    value = count_at_least(args, key, f"the {key} of {name}", least=0)
    if value is not None and value > MAX_ELEMENTS:
        raise Impossible(f"the {key} of {name} is {value:.3g}, more elements than a tensor holds")
    return value


def cut_short(ranks: Any) -> bool:
    """torch's profiler writes at most 30 of a list's entries, then `...` ("[0, 1, ..., 29, ...]")."""
    return isinstance(ranks, str) and "..." in ranks


def event_args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def int_list(value: Any) -> tuple[int, ...] | None:
    """A list of integers, as JSON or as the text torch writes ("[0, 1]"); None for anything else."""
    if isinstance(value, str):
        return _int_list_text(value)
    if isinstance(value, list) and all(as_int(item) is not None for item in value):
        return tuple(value)
    return None


@functools.lru_cache(maxsize=1024)
def _int_list_text(text: str) -> tuple[int, ...] | None:
    """int_list of a text: a job repeats a few (its groups' ranks, "[]"), so each is parsed once."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return int_list(value) if isinstance(value, list) else None


def input_elements(args: dict[str, Any]) -> tuple[int | None, tuple[str, int] | None]:
    """The elements of the tensors an annotation names (`Input Dims` with `Input type`), and their dtype;
    (None, None) where the trace was taken without shapes."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None, None
    elements, dtype = 0, None
    for shape, type_name in zip(dims, types, strict=False):  # a shape without its type is skipped
        known = dtype_of(type_name) if isinstance(type_name, str) else None
        if known is None or not isinstance(shape, list) or not all(as_int(n) is not None for n in shape):
            continue
        if any(n < 0 for n in shape):
            raise Impossible(f"a collective's Input Dims hold {min(shape)}")
        elements += math.prod(shape)
        dtype = dtype or known
    return (elements, dtype) if dtype is not None else (None, None)


@dataclass(frozen=True)
class ProcessGroupInfo:
    """A process group as distributedInfo's pg_config lists it: its name and its global ranks."""

    name: str
    ranks: tuple[int, ...]


def process_groups_of(config: Any) -> tuple[ProcessGroupInfo, ...]:
    """distributedInfo's pg_config: each group's name and global ranks (entries not of that shape dropped)."""
    if not isinstance(config, list):
        return ()
    groups = []
    for entry in config:
        if isinstance(entry, dict) and isinstance(entry.get("pg_name"), str):
            ranks = int_list(entry.get("ranks"))
            if ranks is not None:
                groups.append(ProcessGroupInfo(entry["pg_name"], ranks))
    return tuple(groups)


class CallFacts(Protocol):
    """What check_call reads of a collective call (trace_reader.CollectiveCall has these fields)."""

    op: str
    size_bytes: int | None
    group_size: int | None
    group_ranks: tuple[int, ...] | None


def check_call(call: CallFacts, world_size: int | None) -> None:
    """A call's group within the world, and its size within what a tensor holds."""
    if call.group_ranks and min(call.group_ranks) < 0:
        raise Impossible(f"the group of {call.op} holds rank {min(call.group_ranks)}")
    if call.group_ranks and world_size is not None and max(call.group_ranks) >= world_size:
        raise Impossible(f"the group of {call.op} holds rank {max(call.group_ranks)}, in a world of {world_size}")
    if call.group_size is not None and world_size is not None and call.group_size > world_size:
        raise Impossible(f"{call.op} runs on {call.group_size} ranks, in a world of {world_size}")
    if call.size_bytes is not None and call.size_bytes > MAX_ELEMENTS:
        raise Impossible(f"{call.op} of {call.size_bytes:.3g} bytes, more than a tensor holds")
