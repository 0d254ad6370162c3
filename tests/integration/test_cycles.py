"""--cycles: the whole sweep again and again, every cycle's rows kept and the spread said at the end."""

from __future__ import annotations

import pytest

from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import run_cli

pytestmark = pytest.mark.integration


def test_three_cycles_keep_every_row_and_report_the_spread(tmp_path):
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot", "--workers", "2", "--op", "all_reduce", "--sizes", "1K,4K", "--iters", "2",
                      "-w", "0", "--cycles", "3", "--out", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_rows(out)
    assert [(r.cycle, r.size_bytes) for r in rows] == [(c, s) for c in (1, 2, 3) for s in (1024, 4096)]
    assert all(r.wrong == 0 for r in rows)
    assert not (out / "busbw.png").exists()  # --no-plot reached the local workers' rank 0
    timings = read_meta(out)["timings"]  # set-up costs, the slowest rank's; no split, so no split_s
    assert sorted(timings) == ["first_op_s", "init_s"] and all(value > 0 for value in timings.values())
    assert any(line.startswith("# set-up (slowest rank): process group ") for line in result.stdout.splitlines())
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("# cycle ")] == ["# cycle 1 of 3", "# cycle 2 of 3",
                                                                      "# cycle 3 of 3"]
    at = lines.index("# busbw across 3 cycles (GB/s): min (its cycle) / median / max")
    assert [line.split(":")[0] for line in lines[at + 1: at + 3]] == ["#   all_reduce in 1K", "#   all_reduce in 4K"]
    for line, size in zip(lines[at + 1: at + 3], (1024, 4096), strict=True):
        measured = [r for r in rows if r.size_bytes == size]
        low = min(measured, key=lambda r: r.busbw_gbps)
        assert f"{low.busbw_gbps:.3f} (cycle {low.cycle})" in line
