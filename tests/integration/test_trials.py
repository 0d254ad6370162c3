"""A real 2-rank gloo sweep with --trials 3: spread columns, their consistency, and the noise warning."""

from __future__ import annotations

import pytest

from nccl_bench.results.csv_reader import read_rows
from tests.helpers.launch import run_torchrun

pytestmark = pytest.mark.integration


def test_trials_write_spread_columns_and_flag_noise_consistently(tmp_path):
    out = tmp_path / "run"
    # Short samples keep the launch cheap; --iters auto still calibrates each size.
    result = run_torchrun(2, ["sweep", "--no-plot",
                              "--op", "all_reduce,all_gather", "--sizes", "1K,256K", "--trials", "3",
                              "--min-sample-ms", "20", "-w", "2", "--out", str(out)])
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    rows = read_rows(out)
    assert len(rows) == 6  # all_reduce in-place; all_gather out- and in-place; 2 sizes each
    for row in rows:
        assert row.trials == 3 and row.iters >= 3
        assert row.time_min_us is not None and row.time_max_us is not None
        assert 0 < row.time_min_us <= row.time_us <= row.time_max_us
        assert 0 < row.p50_us <= row.p99_us
        spread = (row.time_max_us - row.time_min_us) / row.time_us
        assert ("noisy" in row.flags.split(";")) == (spread > 0.10), (row.op, row.size_bytes, spread, row.flags)
    noisy = sum("noisy" in row.flags for row in rows)
    warning = f"# warning: {noisy} row(s) vary more than 10% between trials"
    if noisy:
        assert warning in result.stdout and "--trials" in result.stdout
    else:
        assert "vary more than 10%" not in result.stdout
    assert "trials 3" in result.stdout  # the header says how the rows were measured
