"""`nccl-bench replay` without ranks: a public 2-GPU NCCL trace's communication profile, every collective its
record_param_comms events name, counted and sized as the events say, and no NCCL algorithm or protocol
claimed (its kernels' names do not say)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from tests.helpers.forked_cli import run_forked
from tests.helpers.launch import worker_env

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
PUBLIC_2GPU = TRACES / "nccl_2gpu_rank0.json.gz"
# torch's names in this trace, and the bytes of its element types (record_param_comms' `dtype`)
OPS = {"allreduce": "all_reduce", "broadcast": "broadcast"}
ELEMENT_BYTES = {"Float": 4, "Long": 8}


def test_the_profile_of_a_public_nccl_trace_lists_every_collective_its_records_name(tmp_path):
    events = json.loads(gzip.decompress(PUBLIC_2GPU.read_bytes()))["traceEvents"]
    records = [e["args"] for e in events
               if e.get("name") == "record_param_comms" and e["args"].get("Collective name") in OPS]
    expected = Counter((OPS[a["Collective name"]], a["In msg nelems"] * ELEMENT_BYTES[a["dtype"]]) for a in records)
    assert sum(expected.values()) == 21  # the trace's own count: 15 all_reduces and 6 broadcasts

    result = run_forked(["replay", str(PUBLIC_2GPU), "--json", str(tmp_path / "profile.json")], cwd=tmp_path,
                        env=worker_env({"COLUMNS": "200"}))
    assert result.returncode == 0, result.stderr[-2000:]
    profile = json.loads((tmp_path / "profile.json").read_text())
    assert profile["trace"] == {"backend": "nccl", "world_size": 2, "nccl_version": "2.17.1", "ranks_read": [0]}
    listed = profile["collectives"]
    assert Counter({(c["op"], c["bytes"]): c["count"] for c in listed}) == expected
    assert all((c["algo"], c["proto"], c["group_size"]) == (None, None, 2) for c in listed)
    assert all(c["replay_time_us"] is None and c["efficiency"] is None for c in listed)
    totals = [c["count"] * c["job_time_us"] for c in listed]
    assert totals[0] >= totals[-1]  # the costliest first

    lines = result.stdout.splitlines()
    assert lines[0].startswith("# communication profile of 1 trace(s)") and "NCCL 2.17.1" in lines[0]
    table = [line.split() for line in lines if line.startswith(("all_reduce", "broadcast"))]
    assert len(table) == len(listed) and all(cells[-3:-1] == ["-", "-"] for cells in table)
    assert "RING" not in result.stdout and "LL" not in result.stdout
    assert "alone here" not in result.stdout  # nothing replayed without ranks
    assert not (tmp_path / "results").exists()  # and no run folder made
