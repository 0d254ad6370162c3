"""benchmarks/gpu_smoke_checks.py: every check of the GPU scripts passes on the figure it judges and
fails, with one FAIL line, when that figure is wrong or missing (no PASS with an empty detail)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from nccl_bench.errors import RunFailedError
from nccl_bench.results.run_folder import write_meta
from tests.helpers.rows import row, write_run

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("gpu_smoke_checks", REPO / "benchmarks" / "gpu_smoke_checks.py")
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)

FAILED = RunFailedError("").exit_code
META = {"status": "complete", "versions": {"torch": "2.13"}, "config": {"ops": ["all_reduce"]}, "hostnames": ["h"],
        "devices": ["cpu"], "world_size": 1, "started_utc": "2026-11-23T10:00:00+00:00",
        "ended_utc": "2026-11-23T10:00:05+00:00"}


def _check(capsys, *argv) -> tuple[int, str]:
    code = checks.main([str(a) for a in argv])
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("PASS " if code == 0 else "FAIL ") and line.split(": ", 1)[1]
    return code, line


def _run(tmp_path, rows, **meta) -> Path:
    folder = write_run(tmp_path / "run", rows)
    write_meta(folder, {**META, **meta})
    return folder


def test_a_run_passes_with_its_figures_and_fails_on_a_wrong_element_or_a_missing_meta(tmp_path, capsys):
    folder = _run(tmp_path, [row(world_size=1)])
    assert _check(capsys, "run", folder)[0] == 0
    assert "world size 1, expected 2" in _check(capsys, "run", folder, "--ranks", "2")[1]
    bad = _run(tmp_path / "b", [row(wrong=3)])
    assert "3 wrong elements" in _check(capsys, "run", bad)[1]
    assert "no meta.json" in _check(capsys, "run", tmp_path / "nothing")[1]


def test_limits_fails_without_a_peak_and_on_a_gpu_without_gpus(tmp_path, capsys):
    peak = {"peak_gbps": 21.2, "label": "host memory copy", "source": "host-memcpy"}
    good = tmp_path / "limits.json"
    good.write_text(json.dumps({"gpus": [], "peak": peak}))
    assert _check(capsys, "limits", good) == (0, "PASS limits: peak 21.20 GB/s, host memory copy [host-memcpy]")
    assert "0 GPU(s) described, peak from host-memcpy" in _check(capsys, "limits", good, "--gpu")[1]
    for broken in ({"peak": None}, {"peak": {"label": "x"}}, "not json"):
        path = tmp_path / "broken.json"
        path.write_text(broken if isinstance(broken, str) else json.dumps(broken))
        assert _check(capsys, "limits", path)[1].startswith("FAIL limits: no peak in")
    assert _check(capsys, "limits", tmp_path / "absent.json")[0] == 1


def test_a_refusal_is_exit_2_with_its_line_and_torchruns_1_is_not_one(tmp_path, capsys):
    log = tmp_path / "too_large.log"
    log.write_text("nccl-bench: error: --sizes: the sweep needs 4 MiB of GPU 0 memory\n")
    assert _check(capsys, "refused", log, 2, "--needle", "memory")[0] == 0
    assert "exit 1, expected 2" in _check(capsys, "refused", log, 1, "--needle", "memory")[1]
    assert "no error line naming 'cuda'" in _check(capsys, "refused", log, 2, "--needle", "cuda")[1]
    log.write_text(log.read_text() + "Traceback (most recent call last):\n")
    assert "a traceback" in _check(capsys, "refused", log, 2, "--needle", "memory")[1]


def test_torchrun_exit_reads_the_workers_code_from_torchruns_summary(tmp_path, capsys):
    log = tmp_path / "t.log"
    log.write_text("[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 2 (pid: 12944)\n")
    assert _check(capsys, "torchrun-exit", log, 1, "--child", 2)[0] == 0
    assert _check(capsys, "torchrun-exit", log, 2, "--child", 2)[0] == 1
    log.write_text("no summary\n")
    assert "worker exit None" in _check(capsys, "torchrun-exit", log, 1, "--child", 2)[1]


def _stalled(tmp_path, seconds: float, status="failed", rows=1) -> Path:
    return _run(tmp_path, [row()] * rows, status=status,
                ended_utc=f"2026-11-23T10:00:{seconds:04.1f}+00:00")


STALL_LINE = "nccl-bench: error: all_gather at 1K failed on rank 0: no progress for more than 8 s (--timeout 8 s)\n"


def test_a_stall_passes_only_ended_by_the_deadline_in_time_without_sigabrt(tmp_path, capsys):
    log = tmp_path / "stall.log"
    log.write_text(STALL_LINE)
    args = ("--timeout", 8, "--rows", 1)
    folder = _stalled(tmp_path / "ok", 12.1)
    assert _check(capsys, "stall", folder, log, FAILED, *args)[0] == 0
    assert "(SIGABRT)" in _check(capsys, "stall", folder, log, 134, *args)[1]
    assert "expected <= 18 s (the watchdog would act at 22 s)" in _check(
        capsys, "stall", _stalled(tmp_path / "slow", 25.0), log, FAILED, *args)[1]
    assert "expected 'failed' with 1" in _check(
        capsys, "stall", _stalled(tmp_path / "running", 12.0, status="running"), log, FAILED, *args)[1]
    assert "does not name 'rank 1'" in _check(capsys, "stall", folder, log, FAILED, *args, "--names", "rank 1")[1]
    log.write_text("Fatal Python error: Aborted\nSignal 6 (SIGABRT) received by PID 7\n")
    line = _check(capsys, "stall", folder, log, FAILED, *args)[1]
    assert "SIGABRT in the log" in line and "no line naming --timeout" in line


def test_a_lost_rank_is_named_and_the_doctor_needs_its_verdict(tmp_path, capsys):
    folder = _run(tmp_path, [row()], status="failed")
    log = tmp_path / "kill.log"
    log.write_text("nccl-bench: error: all_reduce at 1M failed: rank 1 on host vm (process 9 died) does not answer\n")
    assert _check(capsys, "rank-lost", folder, log, 1)[0] == 0
    assert "exit 0" in _check(capsys, "rank-lost", folder, log, 0)[1]
    assert "no error line names rank 2" in _check(capsys, "rank-lost", folder, log, 1, "--rank", 2)[1]
    assert "no doctor.json verdict" in _check(capsys, "doctor", folder)[1]
    (folder / "doctor.json").write_text(json.dumps({"verdict": "healthy", "nodes": [{"intra_busbw_gbps": 3.5}]}))
    assert _check(capsys, "doctor", folder)[0] == 1  # meta.json says failed
    write_meta(folder, {**META})
    assert _check(capsys, "doctor", folder)[0] == 0


def test_meta_env_and_calibration_fail_on_what_is_missing(tmp_path, capsys):
    folder = _run(tmp_path, [row(iters=1000)], env={"NCCL_DEBUG": "WARN", "TORCH_FR_BUFFER_SIZE": "0"})
    assert _check(capsys, "meta-env", folder)[0] == 0
    write_meta(folder, {**META, "env": {"NCCL_DEBUG": "WARN"}})
    assert _check(capsys, "meta-env", folder)[0] == 1
    assert _check(capsys, "calibration", folder)[0] == 0
    assert "iters 3" in _check(capsys, "calibration", _run(tmp_path / "few", [row(iters=3)]))[1]
    assert "no rows in" in _check(capsys, "calibration", tmp_path / "empty")[1]


@pytest.mark.parametrize("script", ["gpu_smoke.sh", "gpu_multi.sh"])
def test_the_scripts_have_their_run_bit(script):
    assert (REPO / "benchmarks" / script).stat().st_mode & 0o111


@pytest.mark.parametrize("script", ["gpu_smoke.sh", "gpu_multi.sh"])
def test_a_needle_that_starts_with_dashes_is_passed_as_one_argument(script):
    # argparse takes `--needle "--cuda-graph: ..."` for two options: the GPU-only refusal checks
    # would end in a usage error instead of a verdict
    text = (REPO / "benchmarks" / script).read_text()
    assert '--needle "--' not in text and "--needle '--" not in text


def test_a_needle_passed_whole_is_judged(tmp_path, capsys):
    log = tmp_path / "barrier_graph.log"
    log.write_text("nccl-bench: error: --cuda-graph: nothing left to capture in --op barrier\n")
    assert _check(capsys, "refused", log, 2, "--needle=--cuda-graph: nothing left to capture")[0] == 0


def test_rows_whose_capture_held_nothing_are_not_counted_as_measured(tmp_path, capsys):
    empty = [row(world_size=1, flags="empty_cuda_graph"),
             row(world_size=1, size_bytes=2048, flags="noisy;empty_cuda_graph")]
    folder = _run(tmp_path, [row(world_size=1), *empty])
    code, line = _check(capsys, "run", folder, "--min-rows", "2")
    assert code == 1 and "1 measured rows, expected >= 2 (2 more measured nothing: empty_cuda_graph" in line
    code, line = _check(capsys, "run", folder)
    assert code == 0 and "1 measured of 3 rows (2 more measured nothing: empty_cuda_graph, not counted)" in line


def test_in_place_rows_of_one_rank_are_not_counted_as_measured(tmp_path, capsys):
    alone = [row(world_size=1, placement="in_place", flags="one_rank_in_place"),
             row(world_size=1, size_bytes=2048, flags="empty_cuda_graph")]
    folder = _run(tmp_path, [row(world_size=1), *alone])
    code, line = _check(capsys, "run", folder)
    assert code == 0 and ("1 measured of 3 rows (2 more measured nothing: empty_cuda_graph, one_rank_in_place, "
                          "not counted)") in line


def test_a_line_says_what_its_step_proves(tmp_path, capsys):
    folder = _run(tmp_path, [row(world_size=1)])
    code, line = _check(capsys, "run", folder, "--proves", "one rank only")
    assert code == 0 and line.endswith("; proves: one rank only")
