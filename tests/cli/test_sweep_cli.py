"""cli/sweep.py: what the process that starts local workers keeps to itself; the floor and --prom after the run."""

from __future__ import annotations

import pytest

from nccl_bench.cli import sweep
from nccl_bench.cli.on_ranks import worker_args
from nccl_bench.cli.option_sets import WORKERS
from nccl_bench.errors import EXIT_RUN_FAILED, RunFailedError
from nccl_bench.option_types import declared
from nccl_bench.render import live
from nccl_bench.results import whole_file
from nccl_bench.sweep.sweep_config import BaselineOptions, SweepConfig
from nccl_bench.sweep.sweep_entry import SweepJob
from tests.helpers.rows import MiB, row, write_run

KEPT_AWAY = (*(carried.item for carried in declared(BaselineOptions).values()),
             WORKERS)  # what the sweep keeps from its local workers


def test_local_workers_do_not_get_the_baseline_options():
    args = ["sweep", "--op", "all_reduce", "--baseline", "b", "--tolerance=5%", "--save-baseline", "main",
            "--iters", "5"]
    assert worker_args(args, KEPT_AWAY) == ["sweep", "--op", "all_reduce", "--iters", "5"]


def test_local_workers_do_not_get_workers_or_the_baseline_switches():
    args = ["sweep", "--workers", "3", "--allow-mismatch", "--replace-baseline", "--workers=2", "--sizes", "1K"]
    assert worker_args(args, KEPT_AWAY) == ["sweep", "--sizes", "1K"]


def test_local_workers_get_the_metrics_file_and_the_floor_is_kept_too():
    args = ["sweep", "--prom", "m.prom", "--min-busbw", "5", "--sizes", "1K"]
    assert worker_args(args, KEPT_AWAY) == args  # rank 0 of the workers writes --prom; the floor is judged here


def test_a_metrics_file_that_cannot_be_written_after_the_run_is_one_line_exit_3(tmp_path, monkeypatch):
    """The one --prom writer of sweep and doctor; the CLI's edge prints the failure as its one line."""
    def full(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(whole_file, "replace_whole", full)
    with pytest.raises(RunFailedError) as ended:
        live.write_prom(tmp_path / "m.prom", tmp_path, lambda meta, now: "", "--prom")
    assert ended.value.exit_code == EXIT_RUN_FAILED == 3 and not ended.value.quiet
    assert str(ended.value) == (f"--prom: cannot write {tmp_path / 'm.prom'}: No space left on device "
                                "(the results on disk are kept)")


def test_the_floor_is_judged_from_the_csv(tmp_path, capsys):
    run = write_run(tmp_path / "run", [row(size_bytes=MiB, time_us=10.0), row(size_bytes=4 * MiB, time_us=100.0)])
    with pytest.raises(SystemExit) as ended:
        sweep._after_sweep(SweepJob(SweepConfig(min_busbw_gbps=50.0), None), run)
    assert ended.value.code == 1
    assert capsys.readouterr().err == ("nccl-bench: error: below --min-busbw 50 GB/s at the op's largest measured "
                                       "size: all_reduce 4M in_place: 41.94 GB/s\n")
    sweep._after_sweep(SweepJob(SweepConfig(min_busbw_gbps=41.9), None), run)  # returns: exit 0
    assert capsys.readouterr().err == ("nccl-bench: --min-busbw 41.9 GB/s reached at each op's largest measured size "
                                       "(lowest: all_reduce 4M in_place: 41.94 GB/s)\n")
