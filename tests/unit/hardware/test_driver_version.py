"""The NVIDIA driver's version as /proc/driver/nvidia/version writes it (open and proprietary modules)."""

from __future__ import annotations

import pytest

from nccl_bench.hardware.host import proc_driver_version


@pytest.mark.parametrize("text,expected", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
     "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n", "550.54.15"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (dvs-builder@U16)\n",
     "560.35.03"),
    ("something else\n", None),
])
def test_the_driver_version_is_read_from_proc(tmp_path, text, expected):
    folder = tmp_path / "driver" / "nvidia"
    folder.mkdir(parents=True)
    (folder / "version").write_text(text)
    assert proc_driver_version(tmp_path) == expected


def test_no_driver_no_version(tmp_path):
    assert proc_driver_version(tmp_path) is None
