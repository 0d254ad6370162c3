"""torch's flight recorder, read on a stall: each process group's last enqueued and last completed
collective on this rank, in torch's own dump format.

torch keeps two recorders (torch 2.13): ProcessGroupNCCL's own (`_dump_nccl_trace_json`, in builds
with NCCL only) and the generic one that ProcessGroupGloo writes to (`_dump_fr_trace_json`). Both rings
hold TORCH_FR_BUFFER_SIZE entries; torch still reads the NCCL one's older name,
TORCH_NCCL_TRACE_BUFFER_SIZE, and (2.13) warns that it is deprecated. Both dumps carry `pg_status`
(per group: last_enqueued_collective, last_completed_collective) and `entries` (each collective's
group, collective_seq_id and profiling_name), which is what torch's fr_trace analyzer matches across
ranks. A torch or a backend without one is said so, never stood in for.
"""

from __future__ import annotations

import json
from typing import Any

from nccl_bench.units.rank_positions import GroupRecord, rank_ranges

# The world's description in a dump (torch's name for the default group's store prefix, too).
DEFAULT_DESC = "default_pg"
# The size of each recorder's ring (entries); 0 turns it off.
BUFFER_ENV = {"nccl": "TORCH_FR_BUFFER_SIZE (or TORCH_NCCL_TRACE_BUFFER_SIZE)", "gloo": "TORCH_FR_BUFFER_SIZE"}
# The dump function of each backend's recorder, in torch._C._distributed_c10d, JSON first.
DUMPS = {"nccl": ("_dump_nccl_trace_json", "_dump_nccl_trace"), "gloo": ("_dump_fr_trace_json", "_dump_fr_trace")}


def _dump_function(backend: str):
    """torch's dump of `backend`'s recorder, its name, or (None, why not)."""
    import torch

    try:
        import torch._C._distributed_c10d as c10d
    except ImportError:  # a torch built without distributed
        c10d = None
    for name in DUMPS.get(backend, ()):
        found = getattr(c10d, name, None)
        if found is not None:
            return found, name
    return None, f"not available for {backend} in torch {torch.__version__}"


def availability(backend: str) -> str | None:
    """None where torch has a recorder for `backend`; else the sentence meta.json says."""
    found, why = _dump_function(backend)
    return None if found is not None else why


def dump(backend: str) -> dict[str, Any] | str:
    """This rank's recorder as torch dumps it (a dict), or why there is none (a sentence)."""
    found, name = _dump_function(backend)
    if found is None:
        return name
    options = {"includeCollectives": True, "onlyActive": False}
    if not name.endswith("_json"):
        options["includeStackTraces"] = False
    try:
        try:
            raw = found(**options)
        except TypeError:  # a torch whose dump takes none of these: its defaults
            raw = found()
        if name.endswith("_json"):
            return json.loads(raw.decode() if isinstance(raw, bytes) else raw)
        import pickle

        return pickle.loads(raw)
    except Exception as exc:  # a dump that fails is said, not raised: the stall's line comes first
        return f"the {backend} flight recorder could not be dumped ({type(exc).__name__}: {exc})"


def group_records(dumped: dict[str, Any], members: dict[str, tuple[int, ...]] | None = None) -> list[GroupRecord]:
    """Each group's last enqueued and completed collective, from a dump (pg_status).

    A group's name in the dump is this rank's own (torch numbers the groups a rank is in), so two
    ranks' group "1" may be different groups (--split's mod:2); `members` (name -> the group's world
    ranks) names a group by its ranks wherever they are known: "ranks 1,3". The world keeps its
    description, "default_pg"."""
    names = {key: f"ranks {rank_ranges(ranks)}" for key, ranks in (members or {}).items()}
    last_ops = {}
    for entry in dumped.get("entries") or ():
        key, desc = (str(part) for part in (entry.get("process_group") or ("", ""))[:2])
        if desc == DEFAULT_DESC or (desc and desc != "undefined" and key not in names):
            names[key] = desc
        last_ops[key] = str(entry.get("profiling_name", ""))
    records = []
    for key, status in (dumped.get("pg_status") or {}).items():
        records.append(GroupRecord(names.get(str(key), str(key)), int(status.get("last_enqueued_collective", 0)),
                                   int(status.get("last_completed_collective", 0)), last_ops.get(str(key), "")))
    return [record for record in records if record.enqueued > 0]


def group_members() -> dict[str, tuple[int, ...]]:
    """Each live group's name (as the recorder keys it) -> its world ranks, from torch's registry of
    groups; empty once the groups are aborted (read the recorder before the abort)."""
    try:
        from torch.distributed import distributed_c10d as c10d

        return {str(name): tuple(sorted(c10d._world.pg_group_ranks[pg])) for pg, name in c10d._world.pg_names.items()}
    except Exception:  # a torch whose registry differs: the recorder's own names are kept
        return {}


def records(backend: str) -> list[GroupRecord] | str:
    """This rank's groups as its recorder saw them, or why there are none."""
    dumped = dump(backend)
    if isinstance(dumped, str):
        return dumped
    found = group_records(dumped, group_members())
    return found if found else f"the {backend} flight recorder recorded nothing ({BUFFER_ENV.get(backend)} may be 0)"
