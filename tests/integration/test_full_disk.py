"""A sweep whose results disk fills mid-run, with real ranks on a real (small) tmpfs: one line naming
the file, exit EXIT_RUN_FAILED, every complete row readable, and meta.json true or the line says why not."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import REPO, worker_env
from tests.helpers.rows import rows_on_disk
from tests.helpers.small_disk import fill, small_disk

pytestmark = pytest.mark.integration

SIZES = ",".join(f"{k}K" for k in range(1, 41))  # enough points that the sweep is running when the disk fills


def test_a_disk_that_fills_mid_sweep_is_one_line_and_keeps_the_rows(tmp_path):
    with small_disk(tmp_path / "disk", 3 * 2**20 // 2) as disk:
        out = disk / "run"
        proc = subprocess.Popen(
            [sys.executable, "-m", "nccl_bench", "sweep", "--no-plot",
             "--op", "all_reduce", "--sizes", SIZES, "--iters", "2",
             "--warmup", "1", "--workers", "2", "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=worker_env(), cwd=REPO)
        try:
            deadline = time.monotonic() + 120
            while rows_on_disk(out) < 1 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            fill(disk)
            _, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == EXIT_RUN_FAILED, stderr[-3000:]
        assert "Traceback" not in stderr
        errors = [line for line in stderr.splitlines() if line.startswith("nccl-bench: error: ")]
        assert len(errors) == 1 and f"no space left on {out / 'results.csv'}" in errors[0], stderr[-3000:]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a last line cut mid-number would warn
            rows = read_rows(out)
        assert rows and all(r.status == "ok" for r in rows) and len(rows) < 40
        assert not (out / "meta.json.tmp").exists()
        meta = read_meta(out)
        if meta["status"] == "running":
            assert errors[0].endswith(f'no space left on {out / "meta.json"}: it still says "running"')
        else:
            assert meta["status"] == "failed" and meta["rows"] == len(rows)
