"""Inputs kept gzip-compressed (a job's log or a run's CSV as .gz) are read as their text, told by their
first bytes (not their name); compressed data that is cut short or damaged is one line naming the file."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.render.formats import render_runs
from nccl_bench.results.loader import load_rows, stream_rows
from tests.helpers.rows import row, write_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def _gzipped(source: Path, target: Path) -> Path:
    target.write_bytes(gzip.compress(source.read_bytes()))
    return target


@pytest.mark.parametrize("name", ["v2.20.0_all_reduce_perf_2ranks.txt", "constructed_v3_all_reduce_perf.json"])
def test_a_compressed_nccl_tests_file_reads_as_its_text(tmp_path, name):
    plain = FIXTURES / name
    packed = _gzipped(plain, tmp_path / "all_reduce_perf.gz")  # no .txt, .json or .gz hint in the name
    assert load_rows(packed) == load_rows(plain)
    assert list(stream_rows(packed)) == load_rows(plain)


def test_a_compressed_results_csv_reads_as_its_rows(tmp_path):
    run = write_run(tmp_path / "run", [row(), row(size_bytes=2 * 1024 * 1024)])
    packed = _gzipped(run / "results.csv", tmp_path / "results.csv.gz")
    assert load_rows(packed) == load_rows(run)


def test_a_compressed_export_reads_as_its_rows(tmp_path):
    run = write_run(tmp_path / "run", [row()])
    plain = tmp_path / "export.json"
    plain.write_text(render_runs([run], [("x", load_rows(run))], "json"))
    assert load_rows(_gzipped(plain, tmp_path / "export.gz")) == load_rows(plain)


def test_compressed_data_cut_short_is_one_line(tmp_path):
    packed = gzip.compress((FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt").read_bytes())
    cut = tmp_path / "cut.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(UserInputError, match=r"cut\.gz: its gzip data is cut short or damaged"):
        load_rows(cut)
