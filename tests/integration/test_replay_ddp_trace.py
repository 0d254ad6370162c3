"""A real 2-rank training loop (DistributedDataParallel over gloo) traced with torch.profiler, then read:
one all_reduce of every gradient per step and DDP's own broadcasts, counted against the traces' gloo
annotations, each timed by its annotation (gloo runs the collective inside it)."""

from __future__ import annotations

import json

from nccl_bench.replay.profile import profile_traces
from nccl_bench.replay.trace_reader import ANNOTATIONS, read_trace
from tests.replay_job import GRADIENT_ELEMENTS, TRAINING_STEPS, WORLD_SIZE, trace_ddp_job


def test_a_gloo_ddp_jobs_traces_are_read_and_profiled(tmp_path):
    paths = trace_ddp_job(tmp_path)
    traces = [read_trace(path) for path in paths]
    for rank, (path, trace) in enumerate(zip(paths, traces, strict=True)):
        annotations = [e for e in json.loads(path.read_text())["traceEvents"]
                       if e.get("cat") == "user_annotation" and e["name"].startswith("gloo:")]
        assert (trace.backend, trace.rank, trace.world_size, trace.source) == ("gloo", rank, WORLD_SIZE, ANNOTATIONS)
        assert sorted(call.job_time_us for call in trace.calls) == sorted(e["dur"] for e in annotations)
        assert len([c for c in trace.calls if c.op == "all_reduce"]) == TRAINING_STEPS
    profile = profile_traces(traces)
    assert profile.ranks_read == (0, 1) and profile.count_mismatches == ()
    [gradients] = [row for row in profile.rows if row.op == "all_reduce"]
    assert (gradients.size_bytes, gradients.dtype, gradients.group_size, gradients.count) == (
        GRADIENT_ELEMENTS * 4, "float32", WORLD_SIZE, TRAINING_STEPS)
    assert gradients.job_time_us > 0 and gradients.job_busbw_gbps > 0
    assert {row.op for row in profile.rows} <= {"all_reduce", "broadcast"}
