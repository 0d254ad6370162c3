"""nccl-tests' `-J file.json` output read into ResultRows (layout of src/util.cu, JSON_FILE_VERSION 3).

The rows are assembled as the text reader's are (results/nccltests_rows.py): the same op names, type
names and rank-count inference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nccl_bench.errors import UserInputError
from nccl_bench.results.nccltests_names import op_in
from nccl_bench.results.nccltests_rows import Half, SizeLine, Table, table_rows, world_size_of
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT, ResultRow
from nccl_bench.units.op_table import rank_count_matters

UNKNOWN_OP = "unknown"  # neither the command line nor the file name names a binary


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
    lines = [_size_line(index, result, source, option) for index, result in enumerate(results)]
    world_size = world_size_of(op, ranks, lines)
    if world_size is None and rank_count_matters(op):
        raise UserInputError(option, f"{source}: cannot tell how many ranks ran {op} (no devices listed)")
    table = Table(world_size, max(1, len(hosts)), iters if isinstance(iters, int) else None)
    return table_rows(op, lines, table)


def _size_line(index: int, result: Any, source: str, option: str) -> SizeLine:
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
        per_iter = result.get(f"{placement}_per_iter") or {}
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
        ))
    return SizeLine(size_bytes, count, str(result.get("type", "float")), str(result.get("redop", "none")), root,
                    tuple(halves))


def _json_float(value: Any) -> float | None:
    # nccl-tests writes NaN as the string "nan"
    if value is None or value == "nan":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
