"""The life cycle's final meta.json on a disk that filled: the run's line says what meta.json was left
saying (on a real, tiny tmpfs)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED, RunFailedError
from nccl_bench.ranks.session import _LifeCycle
from nccl_bench.results.run_folder import write_meta
from tests.helpers.small_disk import fill, small_disk


def _ending_on_a_full_disk(disk) -> _LifeCycle:
    run = SimpleNamespace(status="running", run_dir=disk, meta=lambda: {"status": run.status, "padding": "x" * 8192})
    body = SimpleNamespace(close=lambda status: {"rows": 3}, meta=lambda: {})
    cycle = _LifeCycle(run, body, None)
    write_meta(disk, {"status": "running"})
    cycle._meta_written = True
    fill(disk)
    cycle._write_final("complete")
    return cycle


def test_a_final_meta_json_that_does_not_fit_fails_the_run_saying_so(tmp_path):
    with small_disk(tmp_path / "disk", 64 * 1024) as disk:
        cycle = _ending_on_a_full_disk(disk)
        with pytest.raises(RunFailedError) as info:
            cycle._say_unwritten()
        assert str(info.value) == f'no space left on {disk / "meta.json"}: it still says "running"'
        assert info.value.exit_code == EXIT_RUN_FAILED and not info.value.quiet
        assert json.loads((disk / "meta.json").read_text()) == {"status": "running"}


def test_after_another_failure_the_line_says_both(tmp_path):
    with small_disk(tmp_path / "disk", 64 * 1024) as disk:
        cycle = _ending_on_a_full_disk(disk)
        first = f"all_reduce at 4K (in_place) failed on rank 0: no space left on {disk / 'results.csv'}"
        meta = f"no space left on {disk / 'meta.json'}"
        with pytest.raises(RunFailedError) as info:
            try:
                raise RunFailedError(first)
            except RunFailedError:
                cycle._say_unwritten()
        assert str(info.value) == f'{first}; {meta}: it still says "running"'
