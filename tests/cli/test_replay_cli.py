"""`nccl-bench replay` without ranks: a public 2-GPU NCCL trace's communication profile, every collective its
record_param_comms events name, counted and sized as the events say, and no NCCL algorithm or protocol
claimed (its kernels' names do not say)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.forked_cli import run_forked
from tests.helpers.launch import worker_env
from tests.helpers.rows import row, write_run

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
    assert profile["trace"].pop("overlap")[0]["overlap_pct"] > 0  # its figure: tests/unit/replay/test_overlap.py
    assert profile["trace"] == {"backend": "nccl", "world_size": 2, "nccl_version": "2.17.1", "ranks_read": [0],
                                "exposed_at_replay": None, "exposed_at_envelope": None}
    listed = profile["collectives"]
    assert Counter({(c["op"], c["bytes"]): c["count"] for c in listed}) == expected
    assert all((c["algo"], c["proto"], c["group_size"]) == (None, None, 2) for c in listed)
    assert all(c["replay_time_us"] is None and c["efficiency"] is None for c in listed)
    totals = [c["count"] * c["job_time_us"] for c in listed]
    assert totals[0] >= totals[-1]  # the costliest first

    lines = result.stdout.splitlines()
    assert lines[0].startswith("# communication profile of 1 trace(s)") and "NCCL 2.17.1" in lines[0]
    table = [line.split() for line in lines if line.startswith(("all_reduce", "broadcast"))]
    assert len(table) == len(listed) and all(cells[10:12] == ["-", "-"] for cells in table)  # algo, proto
    assert "RING" not in result.stdout and "LL" not in result.stdout
    assert "alone here" not in result.stdout  # nothing replayed without ranks
    assert not (tmp_path / "results").exists()  # and no run folder made


def test_a_profile_beside_a_sweep_says_what_each_rows_exposed_time_would_be_at_the_sweeps_busbw(tmp_path):
    # the sweep: all_reduce float32 on 2 ranks at 8 MiB, 40 GB/s busbw; the trace's 8.2 MB all_reduce is nearest
    sweep = write_run(tmp_path / "sweep", [row(size_bytes=8 << 20, dtype="float32", busbw=40.0)])
    result = run_forked(["replay", str(PUBLIC_2GPU), "--envelope", str(sweep), "--json", str(tmp_path / "p.json")],
                        cwd=tmp_path, env=worker_env({"COLUMNS": "250"}))
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads((tmp_path / "p.json").read_text())
    first = document["collectives"][0]
    assert (first["bytes"], round(first["exposed_us"], 3)) == (8_196_000, 9_916.186)
    # busbw 2.478 GB/s in the job, 40 at the sweep: 3,306.963 us per call becomes 204.9 us, and so the exposed time
    assert first["exposed_at_envelope_us"] == pytest.approx(9_916.186 * first["job_busbw_gbps"] / 40.0, abs=1e-3)
    assert round(first["exposed_at_envelope_us"], 1) == 614.4
    [line] = [line.split() for line in result.stdout.splitlines() if line.startswith("all_reduce   8.2 MB")]
    assert line[-1] == "0.614"  # exposed swept (ms)
    # the window: the 5 all_reduce rows at the sweep's busbw, the 2 broadcast rows (int64: no sweep row) as in the job
    window = document["trace"]["exposed_at_envelope"]
    assert (window["rows"], window["projected_rows"], document["trace"]["exposed_at_replay"]) == (7, 5, None)
    assert window["job_us"] == pytest.approx(sum(c["exposed_us"] for c in document["collectives"]))
    assert window["projected_us"] == pytest.approx(sum(
        c["exposed_us"] if c["exposed_at_envelope_us"] is None else c["exposed_at_envelope_us"]
        for c in document["collectives"]))
    assert "at the sweep's busbw (5 of 7 rows projected)" in result.stdout


def test_cuda_graph_on_cpu_is_refused_in_one_line_before_anything_runs(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA GPU, where --cuda-graph is valid")
    result = run_forked(["replay", str(PUBLIC_2GPU), "--cuda-graph", "2", "--workers", "2", "--no-history"],
                        cwd=tmp_path, env=worker_env({"COLUMNS": "200"}))
    assert (result.returncode, result.stdout) == (2, ""), result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        "nccl-bench: error: --cuda-graph: only applies on GPUs (NCCL); this run uses gloo on CPU"]
    assert list(tmp_path.iterdir()) == []  # no run folder, no worker started
