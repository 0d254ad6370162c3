"""A real 2-rank training loop (DistributedDataParallel over gloo) traced with torch.profiler, then read
and replayed: one all_reduce of every gradient per step and DDP's own broadcasts, counted against the
traces' gloo annotations, each timed by its annotation (gloo runs the collective inside it); then
`nccl-bench replay --workers 2` replays each of them on two local ranks, one row per collective of the
trace, the job's time beside the time alone here."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest

from nccl_bench.replay.profile import profile_traces
from nccl_bench.replay.trace_reader import ANNOTATIONS, read_trace
from tests.helpers.launch import run_cli
from tests.helpers.replay_job import GRADIENT_ELEMENTS, TRAINING_STEPS, WORLD_SIZE, trace_ddp_job
from tests.helpers.rows import row, write_run


@pytest.fixture(scope="module")
def ddp_traces(tmp_path_factory):
    """The job's traces, rank 0 first: made once for this module's tests."""
    return trace_ddp_job(tmp_path_factory.mktemp("ddp"))


def test_a_gloo_ddp_jobs_traces_are_read_and_profiled(ddp_traces):
    traces = [read_trace(path) for path in ddp_traces]
    for rank, (path, trace) in enumerate(zip(ddp_traces, traces, strict=True)):
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


def test_the_jobs_collectives_replay_on_two_local_ranks_beside_their_times_in_the_job(ddp_traces, tmp_path):
    profile = profile_traces([read_trace(path) for path in ddp_traces])
    sweep = write_run(tmp_path / "sweep", [row(size_bytes=size, dtype="float32") for size in (8192, 65536)])
    out, history = tmp_path / "run", tmp_path / "history.sqlite"
    done = run_cli(["replay", *map(str, ddp_traces), "--workers", "2", "--warmup", "1", "--min-sample-ms", "10",
                    "--out", str(out), "--json", str(tmp_path / "replay.json"), "--envelope", str(sweep),
                    "--history", str(history)], env={"COLUMNS": "200"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

    with open(out / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((r["op"], int(r["size_bytes"])) for r in rows) == sorted(
        (entry.op, entry.size_bytes) for entry in profile.rows)  # one row per collective of the trace
    assert all((r["source"], r["world_size"], r["status"], r["backend"]) == ("trace:rank0.json", "2", "ok", "gloo")
               for r in rows)
    assert all(float(r["time_us"]) > 0 for r in rows)
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["command"], meta["status"], meta["world_size"], meta["rows"]) == ("replay", "complete", 2, len(rows))

    replayed = json.loads((tmp_path / "replay.json").read_text())["collectives"]
    times = {(r["op"], int(r["size_bytes"])): float(r["time_us"]) for r in rows}
    for entry in replayed:
        assert entry["replay_time_us"] == times[entry["op"], entry["bytes"]]
        assert entry["efficiency"] == pytest.approx(entry["replay_time_us"] / entry["job_time_us"])
    sentences = [line for line in done.stdout.splitlines() if " in the job, " in line and " alone here (" in line]
    assert len(sentences) == len(replayed)  # the job's time beside the time alone here, for each
    assert "all_reduce 10.5 kB: the sweep measured" in done.stdout and " at 8.19 kB; in the job " in done.stdout
    with sqlite3.connect(history) as store:
        assert store.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)


def test_a_two_rank_group_replays_on_two_of_three_ranks_in_a_group_of_its_own(ddp_traces, tmp_path):
    out = tmp_path / "run"
    done = run_cli(["replay", str(ddp_traces[0]), "--workers", "3", "--warmup", "1", "--iters", "3", "--out", str(out),
                    "--no-history"], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(out / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all((r["world_size"], r["group"], r["status"]) == ("2", "ranks 0,1", "ok") for r in rows)
    assert json.loads((out / "meta.json").read_text())["world_size"] == 3
