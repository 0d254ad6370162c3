"""cli/sweep.py: what the process that starts local workers keeps to itself."""

from __future__ import annotations

from nccl_bench.cli.sweep import worker_args


def test_local_workers_do_not_get_the_baseline_options():
    args = ["sweep", "--op", "all_reduce", "--baseline", "b", "--tolerance=5%", "--save-baseline", "main",
            "--iters", "5"]
    assert worker_args(args) == ["sweep", "--op", "all_reduce", "--iters", "5"]


def test_local_workers_do_not_get_workers_or_the_baseline_switches():
    args = ["sweep", "--workers", "3", "--allow-mismatch", "--replace-baseline", "--workers=2", "--sizes", "1K"]
    assert worker_args(args) == ["sweep", "--sizes", "1K"]
