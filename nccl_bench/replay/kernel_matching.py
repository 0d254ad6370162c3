"""Each NCCL kernel of a trace given to the collective that launched it (replay/trace_reader.py's anchors).

A kernel belongs to the anchor whose `External id` it carries: torch links a kernel to the CPU op that
launched it, and record_param_comms is that op. A kernel that names no anchor (older traces, and every
annotation anchor) is found through its launch: the CUDA runtime event with the kernel's `correlation`,
lying within an anchor's span on the same process and thread (the latest-starting anchor that began
before the launch). The second rule needs the runtime events, which are read in a second pass over the
file, and only when the first rule left a kernel unmatched; each launch asked for is looked up as it is
read, so that memory holds the collectives and never every launch of the job.

An anchor here is anything with external_id, kernels (a list), start_us, end_us, pid and tid.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any


def match_kernels(anchors: list, kernels: list, stream) -> int:
    """Give each NCCL kernel to its anchor (module docstring); the number no anchor was found for."""
    by_external_id = {anchor.external_id: anchor for anchor in anchors if anchor.external_id is not None}
    unmatched = 0
    for external_id, _, kernel in kernels:
        anchor = by_external_id.get(external_id)
        if anchor is not None:
            anchor.kernels.append(kernel)
        else:
            unmatched += 1
    if not unmatched:
        return 0
    by_thread: dict[tuple, list] = defaultdict(list)
    for anchor in sorted(anchors, key=lambda a: a.start_us):
        by_thread[anchor.pid, anchor.tid].append(anchor)
    starts = {thread: [a.start_us for a in thread_anchors] for thread, thread_anchors in by_thread.items()}
    wanted = {correlation for external_id, correlation, _ in kernels
              if external_id not in by_external_id and correlation is not None}
    launched = _launch_anchors(stream, wanted, by_thread, starts)
    left = 0
    for external_id, correlation, kernel in kernels:  # the unmatched again, in order, none kept in a list
        if external_id in by_external_id:
            continue
        anchor = launched.get(correlation)
        if anchor is None:
            left += 1
        else:
            anchor.kernels.append(kernel)
    return left


def _launch_anchors(stream, correlations: set, by_thread, starts) -> dict[Any, Any]:
    """For each correlation asked for, the anchor around its CPU-side event (the kernel's launch; the last such
    event's), found as the event is read so that no launch is kept; None where no anchor is around it."""
    found: dict[Any, Any] = {}
    if not correlations:
        return found
    for event in stream:
        args = event.get("args")
        if type(args) is dict and args.get("correlation") in correlations and event.get("cat") != "kernel":
            found[args["correlation"]] = _anchor_around((event.get("pid"), event.get("tid"), event.get("ts")),
                                                        by_thread, starts)
    return found


def _anchor_around(launch, by_thread, starts) -> Any:
    if launch is None:
        return None
    pid, tid, launched_us = launch
    thread_starts = starts.get((pid, tid))
    if thread_starts is None or not isinstance(launched_us, (int, float)):
        return None
    index = bisect.bisect_right(thread_starts, launched_us) - 1
    if index < 0:
        return None
    anchor = by_thread[pid, tid][index]
    return anchor if launched_us <= anchor.end_us else None
