"""Results on a disk that fills up, on a real (tiny) tmpfs: one line naming the file, what was
written before stays readable, nothing half-written left behind; odd --out paths refused first."""

from __future__ import annotations

import json
import warnings

import pytest

from nccl_bench.errors import UserInputError, WriteFailedError
from nccl_bench.results.csv_appender import ResultsWriter
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import MIN_FREE_BYTES, claim_run_dir, write_meta
from nccl_bench.sweep.saved_baselines import save_baseline
from tests.helpers.rows import MiB, row, write_run
from tests.helpers.small_disk import fill, small_disk


def test_a_row_that_does_not_fit_is_cut_back_off_and_named(tmp_path):
    with small_disk(tmp_path / "disk", 64 * 1024) as disk:
        writer = ResultsWriter(disk)
        writer.append(row(size_bytes=1024))
        fill(disk)
        with pytest.raises(WriteFailedError) as info:
            for size in range(2, 1000):  # a tmpfs may hold the rest of a page: write until it is full
                writer.append(row(size_bytes=1024 * size))
        writer.close()
        assert str(info.value) == f"no space left on {disk / 'results.csv'}"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a cut last line would warn
            rows = read_rows(disk)
        assert rows[0] == row(size_bytes=1024) and [r.size_bytes for r in rows] == [1024 * s for s in
                                                                                     range(1, len(rows) + 1)]


def test_meta_json_that_does_not_fit_keeps_the_one_before_and_no_temporary_file(tmp_path):
    with small_disk(tmp_path / "disk", 64 * 1024) as disk:
        write_meta(disk, {"status": "running"})
        fill(disk)
        with pytest.raises(WriteFailedError) as info:
            write_meta(disk, {"status": "complete", "padding": "x" * 8192})
        assert str(info.value) == f"no space left on {disk / 'meta.json'}"
        assert json.loads((disk / "meta.json").read_text()) == {"status": "running"}
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "meta.json"]


def test_a_run_folder_without_room_is_refused_before_measuring(tmp_path):
    with small_disk(tmp_path / "disk", 256 * 1024) as disk:
        with pytest.raises(UserInputError) as info:
            claim_run_dir(disk / "run", "--out", "me")
        assert info.value.option == "--out"
        assert info.value.problem.startswith(f"no space left on {disk / 'run'}: ")
        assert info.value.problem.endswith(f"bytes free, a run needs at least {MIN_FREE_BYTES:,}")
        assert not (disk / "run").exists()


def test_odd_out_paths_are_refused_for_what_they_are(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "empty").write_text("")
    cases = {
        "dangling": f"{tmp_path / 'dangling'} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist",
        "empty": f"{tmp_path / 'empty'} is a file, not a folder",
    }
    for name, problem in cases.items():
        with pytest.raises(UserInputError) as info:
            claim_run_dir(tmp_path / name, "--out", "me")
        assert (info.value.option, info.value.problem) == ("--out", problem)
    assert not (tmp_path / "nowhere").exists()


def test_a_baseline_that_is_a_symbolic_link_is_replaced_where_it_lives(tmp_path):
    kept = save_baseline(write_run(tmp_path / "first", [row()]), "main", tmp_path / "elsewhere")
    link = tmp_path / "results" / "baselines" / "main"
    link.parent.mkdir(parents=True)
    link.symlink_to(kept)
    saved = save_baseline(write_run(tmp_path / "second", [row(size_bytes=2 * MiB)]), "main", tmp_path / "results",
                          replace=True)
    assert saved == link and link.is_symlink()
    assert [r.size_bytes for r in read_rows(kept)] == [2 * MiB]
    assert sorted(p.name for p in kept.parent.iterdir()) == ["main"]


def test_a_first_row_that_does_not_fit_leaves_no_results_csv(tmp_path):
    with small_disk(tmp_path / "disk", 64 * 1024) as disk:
        write_meta(disk, {"status": "failed"})
        writer = ResultsWriter(disk)
        fill(disk)
        with pytest.raises(WriteFailedError):
            writer.append(row(flags="x" * 8192))
        writer.close()
        assert not (disk / "results.csv").exists() and read_rows(disk) == []
