"""GPUs the driver lists but CUDA does not see: the driver's list (NVML's capture, a fake `nvidia-smi -L`
replaying a real GPU's name and UUID) and each cause, read from this process's environment and device files."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from nccl_bench.errors import OptionError
from nccl_bench.hardware import hidden_gpus
from nccl_bench.hardware.nvidia_smi import ListedGpu, parse_gpu_list
from nccl_bench.ranks import preflight
from tests.helpers.fake_smi import fake_smi_env
from tests.unit.hardware.test_nvml_capture import CAPTURE, fake_pynvml

H100 = ListedGpu(0, "NVIDIA H100 80GB HBM3", "GPU-42a6efba-aaf9-7f5e-d6c1-b86e00417731")


@pytest.fixture
def one_h100(monkeypatch):
    """This host as one with an H100 that `nvidia-smi -L` lists (the captured VM's GPU)."""
    for name, value in fake_smi_env("h100_sxm5_passthrough_vm").items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def no_driver(monkeypatch, tmp_path):
    """This host as it is: no nvidia-smi on PATH, no NVML."""
    monkeypatch.setenv("PATH", str(tmp_path))


def test_the_gpu_list_reads_gpus_and_not_their_mig_devices():
    text = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
            "\x1b[1mGPU 1: Tesla V100-SXM2-32GB\x1b[0m\n")
    assert parse_gpu_list(text) == (
        ListedGpu(0, "NVIDIA A100-SXM4-40GB", "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"),
        ListedGpu(1, "Tesla V100-SXM2-32GB", None))


def test_the_fake_nvidia_smi_lists_the_captured_gpu(one_h100):
    assert hidden_gpus.listed_gpus() == ((H100,), "nvidia-smi")


def test_nvml_lists_first_with_the_captured_name_and_uuid(one_h100, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(json.loads(CAPTURE.read_text())))
    assert hidden_gpus.listed_gpus() == ((H100,), "NVML")


def test_a_host_without_a_driver_lists_nothing_and_says_nothing(no_driver):
    assert hidden_gpus.listed_gpus() == ((), "nvidia-smi")
    assert hidden_gpus.hidden_gpus_text({"CUDA_VISIBLE_DEVICES": "7"}, None) is None


@pytest.mark.parametrize(("value", "problem"), [
    (None, None),
    ("0", None),
    ("0,7", None),  # CUDA reads up to the first entry that names no device
    ("GPU-42a6efba", None),  # a unique start of the UUID names it
    ("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", None),
    ("7", "CUDA_VISIBLE_DEVICES=7 names none of them (unset it, or name one by its index, 0, or its UUID)"),
    ("7,0", "CUDA_VISIBLE_DEVICES=7,0 names none of them"),
    ("-1", "CUDA_VISIBLE_DEVICES=-1 names none of them"),
    ("GPU-00000000", "CUDA_VISIBLE_DEVICES=GPU-00000000 names none of them"),
    ("", "CUDA_VISIBLE_DEVICES is set empty, which hides every GPU"),
])
def test_visible_devices_that_name_no_gpu_are_the_cause(value, problem):
    found = hidden_gpus.visible_devices_problem(value, (H100,))
    assert found == problem if problem is None else found.startswith(problem)


def test_two_gpus_are_named_by_their_range_of_indices():
    two = (H100, ListedGpu(1, H100.name, None))
    assert "index, 0 to 1," in hidden_gpus.visible_devices_problem("2", two)
    assert hidden_gpus.visible_devices_problem("1", two) is None


def test_every_cause_found_is_said(tmp_path):
    causes = hidden_gpus.hidden_causes((H100,), {"CUDA_VISIBLE_DEVICES": "7"}, None, tmp_path)
    assert [cause.split(" (")[0] for cause in causes] == ["this torch is a CPU build, without CUDA",
                                                          "CUDA_VISIBLE_DEVICES=7 names none of them"]


def test_with_no_cause_found_the_driver_is_suspected(tmp_path):
    assert hidden_gpus.hidden_causes((H100,), {}, "12.4", tmp_path) == [
        "CUDA did not start on them (torch's CUDA 12.4: is the driver older than it?)"]


def _causes_as_another_user(dev: Path) -> list[str]:
    """hidden_causes with device files in `dev`, in a forked child that is a user who owns none of them
    (root may open any file); the child needs no interpreter to start, which that user may not be able to run."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(read)
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            os.write(write, json.dumps(hidden_gpus.hidden_causes((H100,), {}, "12.4", dev)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    assert os.waitpid(child, 0)[1] == 0
    return json.loads(text)


def test_device_files_this_user_may_not_open_are_the_cause():
    dev = Path(tempfile.mkdtemp(prefix="nccl-bench-dev-"))  # pytest's folders are closed to other users
    try:
        dev.chmod(0o755)
        for name, mode in (("nvidiactl", 0o666), ("nvidia0", 0o600 if os.geteuid() == 0 else 0), ("nvidia-uvm", 0o666),
                           ("nvidia-caps", 0o755)):
            (dev / name).touch()
            (dev / name).chmod(mode)
        assert _causes_as_another_user(dev) == [
            f"this user may not open {dev / 'nvidia0'} (the device files' permissions)"]
    finally:
        for path in dev.iterdir():
            path.unlink()
        dev.rmdir()


def test_auto_warns_once_naming_the_cause_and_chooses_gloo(one_h100, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert preflight.chosen_backend("auto") == "gloo"
    (warning,) = caught
    assert warning.category is preflight.HiddenGpuWarning
    text = str(warning.message)
    assert text.startswith("1 GPU(s) (NVIDIA H100 80GB HBM3) listed by nvidia-smi but hidden from CUDA: ")
    assert "CUDA_VISIBLE_DEVICES=7 names none of them" in text and text.endswith("; running gloo on the CPU instead")


def test_nccl_is_refused_naming_the_cause(one_h100, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    with pytest.raises(OptionError) as refused:
        preflight.chosen_backend("nccl")
    assert refused.value.key == "backend"
    assert refused.value.problem.startswith("nccl needs a GPU that CUDA can use: 1 GPU(s) (NVIDIA H100 80GB HBM3)")
    assert "CUDA_VISIBLE_DEVICES=7 names none of them" in refused.value.problem


def test_gloo_asked_for_and_a_host_without_gpus_say_nothing(one_h100, monkeypatch, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert preflight.chosen_backend("gloo") == "gloo"
        monkeypatch.setenv("PATH", str(tmp_path))  # the host as it is: no driver
        assert preflight.chosen_backend("auto") == "gloo"
    assert caught == []
