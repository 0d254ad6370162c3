"""A sweep's printed output (a Slurm or mpirun job's output file) read as the run folder it names."""

from __future__ import annotations

import pytest
from test_results_files import _row

from nccl_bench.errors import UserInputError
from nccl_bench.results.loader import load_rows
from tests.helpers.rows import write_run

HEADER = ["# nccl_bench: backend gloo via slurm, 6 ranks on 3 node(s) (node01, node02, node03)",
          "# results: {folder}", "# op          placement       size", "# complete: 1 row(s) in {folder}"]


def _log(tmp_path, prefix: str, folder: str) -> object:
    lines = [prefix.format(n=0) + line.format(folder=folder) for line in HEADER]
    lines.insert(1, prefix.format(n=3) + "a warning from another rank")
    path = tmp_path / "job-17.out"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("prefix", ["{n}: ", " {n}: ", "[1,{n}]<stdout>:", ""])
def test_the_folder_named_is_read_relative_or_beside_the_log(tmp_path, monkeypatch, prefix):
    (tmp_path / "sweep-17").mkdir()
    write_run(tmp_path / "sweep-17", [_row()])
    monkeypatch.chdir(tmp_path.parent)  # the job's relative folder is found beside its output file
    assert load_rows(_log(tmp_path, prefix, "sweep-17")) == [_row()]
    assert load_rows(_log(tmp_path, prefix, str(tmp_path / "sweep-17"))) == [_row()]


def test_a_folder_that_is_not_there_is_one_line(tmp_path):
    with pytest.raises(UserInputError) as info:
        load_rows(_log(tmp_path, "{n}: ", "gone-17"))
    assert info.value.problem == (f"{tmp_path}/job-17.out: an nccl_bench sweep's output; its results folder "
                                  "gone-17 is not there or beside the file (copy the folder, or report it directly)")
