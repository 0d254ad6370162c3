"""hardware/stack.py: torch's, CUDA's and NCCL's versions read without importing torch, against what torch says."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from nccl_bench.hardware import stack


def test_the_cuda_build_is_read_from_version_py_as_text():
    version_py = "from typing import Optional\ncuda: Optional[str] = '12.8'\nhip = None\n"
    assert stack.version_py_value(version_py, "cuda") == "12.8"
    assert stack.version_py_value("cuda: Optional[str] = None\n", "cuda") is None
    assert stack.version_py_value("cuda = '11.8'\n", "cuda") == "11.8"
    assert stack.version_py_value("__version__ = '2.13.0'\n", "cuda") is None


@pytest.mark.parametrize(("code", "text"), [(22105, "2.21.5"), (23104, "2.31.4"), (2708, "2.7.8"), (2804, "2.8.4")])
def test_nccl_version_codes_read_as_torch_joins_them(code, text):
    assert stack.nccl_text(code) == text


def test_this_torch_is_named_as_torch_itself_names_it():
    import torch

    assert stack.torch_version() == (torch.__version__, stack.SOURCE_VERSION_PY)
    assert stack.torch_cuda_build() == torch.version.cuda


def test_no_nccl_library_is_unknown_with_its_reason(tmp_path):
    value, source = stack.nccl_version([str(tmp_path)])
    assert value.startswith("unknown (no libnccl.so where torch's start-up looks for it")
    assert source == stack.SOURCE_NCCL_CALL


def _library(site: Path) -> Path:
    """An empty file where the nvidia-nccl wheel puts libnccl.so.2 (the tests' ctypes.CDLL never opens it)."""
    library = site / stack.NCCL_LIBRARY
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")
    return library


def test_a_library_without_nccl_get_version_is_unknown_with_its_reason(tmp_path, monkeypatch):
    library = _library(tmp_path)

    class NoSymbol:
        def __init__(self, path):
            self.path = path

        def __getattr__(self, name):
            raise AttributeError(f"{self.path}: undefined symbol: {name}")

    monkeypatch.setattr(ctypes, "CDLL", NoSymbol)
    value, _ = stack.nccl_version([str(tmp_path)])
    assert value.startswith(f"unknown ({library}: ") and "undefined symbol: ncclGetVersion" in value


def test_the_library_s_answer_is_decoded(tmp_path, monkeypatch):
    _library(tmp_path)

    class Nccl:
        def __init__(self, path):
            pass

        @staticmethod
        def ncclGetVersion(pointer):  # noqa: N802 - NCCL's name
            pointer._obj.value = 22703  # what ctypes.byref wraps
            return 0

    monkeypatch.setattr(ctypes, "CDLL", Nccl)
    assert stack.nccl_version([str(tmp_path)]) == ("2.27.3", stack.SOURCE_NCCL_CALL)


@pytest.mark.parametrize("folder", ["nvidia/nccl/lib", "nvidia/cu13/lib", "nccl/lib"])
def test_the_library_is_found_in_each_layout_torch_searches(tmp_path, folder):
    """CUDA 13's wheels put their libraries in nvidia/cu13/lib; torch's start-up looks there too."""
    library = tmp_path / folder / "libnccl.so.2"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")
    assert stack.nccl_library([str(tmp_path)], cuda_major="13") == library
    if folder == "nvidia/cu13/lib":  # a CUDA 12 build does not look in cu13
        assert stack.nccl_library([str(tmp_path)], cuda_major="12") is None


def test_torch_s_version_keeps_the_build_s_local_tag_that_its_metadata_leaves_out(tmp_path, monkeypatch):
    """On an H200 (torch 2.11.0+cu130 from PyPI) importlib.metadata said 2.11.0 and torch.__version__
    2.11.0+cu130: a fleet judged against a run with torch, or an --expect file, would see two versions."""
    (tmp_path / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n")
    monkeypatch.setattr(stack, "torch_dir", lambda: tmp_path)
    monkeypatch.setattr(stack.importlib.metadata, "version", lambda name: "2.11.0")
    assert stack.torch_version() == ("2.11.0+cu130", stack.SOURCE_VERSION_PY)
    (tmp_path / "version.py").unlink()  # no version.py: the metadata, named as such
    assert stack.torch_version() == ("2.11.0", stack.SOURCE_METADATA)
