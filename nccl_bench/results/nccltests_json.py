"""nccl-tests' `-J file.json` output read into ResultRows (layout of src/util.cu, JSON_FILE_VERSION 3).

The rows are assembled as the text reader's are (results/nccltests_rows.py): the same op names, type
names and rank-count inference. With `-I`, each placement's `*_per_iter` block adds i_p99 and cv% and,
on more than one process, `per_process_max_times_us`: each process's time per iteration (the longest of
its GPUs), from which the late process is named by the sweep's rule (units/arrivals.late_from_durations;
docs/numbers.md says what these times can and cannot tell).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from nccl_bench.errors import UserInputError
from nccl_bench.results.nccltests_names import op_in
from nccl_bench.results.nccltests_rows import Half, SizeLine, Table, table_rows, world_size_of
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT, ResultRow
from nccl_bench.units import arrivals
from nccl_bench.units.op_table import rank_count_matters

UNKNOWN_OP = "unknown"  # neither the command line nor the file name names a binary
Process = tuple[int | None, str]  # a process's first rank and its host


def parse_json(document: dict[str, Any], source: str = "nccl-tests JSON", option: str = "RUN") -> list[ResultRow]:
    """Rows of an nccl-tests `-J file.json` document (layout of src/util.cu, JSON_FILE_VERSION 3)."""
    results = document.get("results")
    if not isinstance(results, list):
        raise UserInputError(option, f"{source} has no 'results' list; is it nccl-tests -J output?")
    args = document.get("args") or []
    op = (op_in(" " + str(args[0])) if args else None) or op_in(Path(source).name) or UNKNOWN_OP
    config = document.get("config") or {}
    devices = config.get("devices") or document.get("devices") or []
    ranks = {d.get("rank") for d in devices if isinstance(d, dict) and isinstance(d.get("rank"), int)}
    hosts = {d.get("hostname") for d in devices if isinstance(d, dict) and d.get("hostname")}
    iters = config.get("iterations")
    processes = [_process(d) for d in devices]
    lines = [_size_line(index, result, source, option, processes) for index, result in enumerate(results)]
    world_size = world_size_of(op, ranks, lines)
    if world_size is None and rank_count_matters(op):
        raise UserInputError(option, f"{source}: cannot tell how many ranks ran {op} (no devices listed)")
    table = Table(world_size, max(1, len(hosts)), iters if isinstance(iters, int) else None)
    return table_rows(op, lines, table)


def _process(device: Any) -> Process:
    """A process's first rank and its host: nccl-tests lists one device entry per process, its first GPU's."""
    if not isinstance(device, dict):
        return None, ""
    rank = device.get("rank")
    return (rank if isinstance(rank, int) else None), str(device.get("hostname") or "")


def _size_line(index: int, result: Any, source: str, option: str,
               processes: Sequence[Process] = ()) -> SizeLine:
    try:
        size_bytes, count = int(result["size"]), int(result["count"])
        root = int(str(result.get("root", "-1")).strip())
    except (KeyError, TypeError, ValueError):
        raise UserInputError(option, f"{source}: result {index} lacks a size, count or root") from None
    halves = []
    for placement in (PLACEMENT_OUT, PLACEMENT_IN):
        half = result.get(placement)
        if not isinstance(half, dict):
            continue
        per_iter = result.get(f"{placement}_per_iter")
        per_iter = per_iter if isinstance(per_iter, dict) else {}
        late_rank, late_host, late_us = _late(per_iter, processes)
        nwrong = half.get("nwrong")
        halves.append(Half(
            placement,
            time_us=_json_float(half.get("time", half.get("cpu_time"))),
            algbw_gbps=_json_float(half.get("alg_bw")),
            busbw_gbps=_json_float(half.get("bus_bw")),
            wrong=None if nwrong is None else int(float(nwrong)),
            p50_us=_json_float(per_iter.get("p50_us")),
            p95_us=_json_float(per_iter.get("p95_us")),
            p99_us=_json_float(per_iter.get("p99_us")),
            i_p99_us=_json_float(per_iter.get("p99_us")),
            i_cv_pct=_json_float(per_iter.get("cv_pct")),
            late_rank=late_rank,
            late_host=late_host,
            late_us=late_us,
        ))
    return SizeLine(size_bytes, count, str(result.get("type", "float")), str(result.get("redop", "none")), root,
                    tuple(halves))


def _late(per_iter: dict[str, Any], processes: Sequence[Process]) -> tuple[int | None, str, float | None]:
    """The late process's first rank, host and lateness (us) from per_process_max_times_us, past the
    iterations nccl-tests' own summary skipped (-I's skip); nothing where the times are absent, hold a
    NaN, or are not one list per listed process (which rank is which would be a guess)."""
    times = per_iter.get("per_process_max_times_us")
    skip = per_iter.get("skipped_iterations")
    skip = skip if isinstance(skip, int) and skip > 0 else 0
    if not isinstance(times, list) or len(times) != len(processes) or not all(isinstance(t, list) for t in times):
        return None, "", None
    durations = [[_json_float(value) for value in process[skip:]] for process in times]
    if any(value is None or not math.isfinite(value) for process in durations for value in process):
        return None, "", None
    late = arrivals.late_from_durations(durations)  # type: ignore[arg-type]
    if late is None or processes[late.rank][0] is None:
        return None, "", None
    rank, host = processes[late.rank]
    return rank, host, late.excess_us


def _json_float(value: Any) -> float | None:
    # nccl-tests writes NaN as the string "nan"
    if value is None or value == "nan":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
