"""A GPU the driver lists but CUDA does not see (CUDA_VISIBLE_DEVICES=7 beside one H100, as a fake
`nvidia-smi -L` replays it): one warning line before gloo measures the CPU (--backend nccl is refused:
tests/cli/test_bad_input.py)."""

from __future__ import annotations

from tests.helpers.fake_smi import hidden_h100_env
from tests.helpers.launch import ok, run_cli, run_torchrun

SWEEP = ["sweep", "--op", "all_reduce", "--sizes", "1K", "--iters", "2", "-w", "1", "--no-history"]
SAID = "nccl-bench: warning: 1 GPU(s) (NVIDIA H100 80GB HBM3) listed by nvidia-smi but hidden from CUDA: "


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "hidden from CUDA" in line]


def test_local_workers_say_the_hidden_gpu_once_before_measuring(tmp_path):
    done = run_cli([*SWEEP, "--workers", "2", "--out", str(tmp_path / "run")], env=hidden_h100_env())
    ok(done)
    (line,) = _warnings(done.stderr)
    assert line.startswith(SAID) and "CUDA_VISIBLE_DEVICES=7 names none of them" in line
    assert line.endswith("; running gloo on the CPU instead")
    assert done.stderr.splitlines()[0] == line  # before anything else the run says


def test_a_launcher_s_ranks_say_it_once(tmp_path):
    done = run_torchrun(2, [*SWEEP, "--out", str(tmp_path / "run")], env=hidden_h100_env())
    ok(done)
    (line,) = _warnings(done.stderr)
    assert line.startswith(SAID)


def test_a_host_without_gpus_warns_of_none(tmp_path):
    done = run_cli([*SWEEP, "--workers", "2", "--out", str(tmp_path / "run")], env={"CUDA_VISIBLE_DEVICES": "7"})
    ok(done)
    assert _warnings(done.stderr) == [] and "warning" not in done.stderr
