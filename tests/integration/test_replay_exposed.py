"""The public 2-GPU NCCL trace replayed on two local gloo ranks: each collective's exposed time in the job
(its kernels outside the compute union) beside what it becomes at the replayed time per call, and the rows'
sum at that speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.launch import run_cli

PUBLIC_2GPU = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "nccl_2gpu_rank0.json.gz"


def test_each_collectives_exposed_time_scales_to_its_replayed_time(tmp_path):
    done = run_cli(["replay", str(PUBLIC_2GPU), "--workers", "2", "--warmup", "1", "--iters", "2", "--trials", "1",
                    "--out", str(tmp_path / "run"), "--json", str(tmp_path / "replay.json"), "--no-history"],
                   env={"COLUMNS": "250"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "replay.json").read_text())
    replayed = document["collectives"]
    assert len(replayed) == 7 and all(entry["replay_time_us"] > 0 for entry in replayed)
    for entry in replayed:
        assert entry["exposed_at_replay_us"] == pytest.approx(
            entry["exposed_us"] * entry["replay_time_us"] / entry["job_time_us"], rel=1e-12)
    # the 8.2 MB all_reduce: 9,916.186 us of its 11,820.962 exposed in the job (tests/unit/replay)
    assert round(replayed[0]["exposed_us"], 3) == 9_916.186
    header = next(line for line in done.stdout.splitlines() if line.startswith("op "))
    assert header.split()[-2:] == ["exposed", "here"]
    table = [line.split() for line in done.stdout.splitlines() if line.startswith("all_reduce   8.2 MB")]
    assert table[0][-1] == f"{replayed[0]['exposed_at_replay_us'] / 1e3:,.3f}"
    window = document["trace"]["exposed_at_replay"]
    assert (window["rows"], window["projected_rows"]) == (7, 7)
    assert window["projected_us"] == pytest.approx(sum(entry["exposed_at_replay_us"] for entry in replayed))
    assert "at the replayed speed (7 of 7 rows projected)" in done.stdout
