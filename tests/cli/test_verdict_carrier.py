"""Who exits with a negative verdict: rank 0 alone (cli/on_ranks.carries_verdict), since a launcher
that ends the job at the first non-zero exit (mpirun) would otherwise cut rank 0's last lines off;
and a sweep's wrong data read back from meta.json by the process that started local workers."""

from __future__ import annotations

import pytest

from nccl_bench.cli import on_ranks
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT
from nccl_bench.ranks.layout import LaunchEnv
from nccl_bench.results.run_folder import write_meta
from nccl_bench.sweep.sweep_entry import SweepJob


@pytest.mark.parametrize(("rank", "verdict"), [(0, EXIT_VERDICT), (1, EXIT_OK), (3, EXIT_OK)])
def test_only_rank_0_exits_with_the_verdict_every_rank_reached(monkeypatch, tmp_path, rank, verdict):
    launch = LaunchEnv("mpirun", rank, 4, rank % 2, 2, "node01", "29500")
    monkeypatch.setattr(on_ranks, "detect_launch", lambda: launch)
    job = on_ranks.OnRanks("doctor", lambda workers: ("gloo", []), lambda here: on_ranks.Ran(tmp_path, EXIT_VERDICT),
                           None, tmp_path, "measurements so far are kept")
    ran = on_ranks.run_on_ranks(job, None)
    assert ran.verdict == verdict and ran.run_dir == (tmp_path if rank == 0 else None)


@pytest.mark.parametrize(("meta", "verdict"), [
    ({"status": "complete", "wrong_total": 3}, EXIT_VERDICT),
    ({"status": "complete", "wrong_total": 0}, EXIT_OK),
    ({"status": "failed", "wrong_total": 3}, EXIT_OK),  # a failed run keeps its own code
    (None, EXIT_OK),
])
def test_a_sweep_s_wrong_data_is_read_back_only_from_a_completed_run(tmp_path, meta, verdict):
    if meta is not None:
        write_meta(tmp_path, meta)
    assert SweepJob.verdict_on_disk(tmp_path) == verdict
