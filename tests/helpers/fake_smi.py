"""The fake `nvidia-smi` (tests/fixtures/nvidia_smi/) as a host's environment: first on PATH, replaying one machine."""

from __future__ import annotations

import os
from pathlib import Path

SMI_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def fake_smi_env(machine: str) -> dict[str, str]:
    """The variables that make `nvidia-smi` answer as `machine`'s captured outputs."""
    return {"PATH": f"{SMI_FIXTURES}{os.pathsep}{os.environ['PATH']}",
            "FAKE_NVIDIA_SMI_DIR": str(SMI_FIXTURES / machine)}


def hidden_h100_env() -> dict[str, str]:
    """One H100 the driver lists (the captured VM's), and CUDA_VISIBLE_DEVICES naming a GPU it does not have."""
    return {**fake_smi_env("h100_sxm5_passthrough_vm"), "CUDA_VISIBLE_DEVICES": "7"}
