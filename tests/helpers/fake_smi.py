"""The fake `nvidia-smi` (tests/fixtures/nvidia_smi/) as a host's environment: first on PATH, replaying one machine."""

from __future__ import annotations

import os
from pathlib import Path

SMI_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def fake_smi_env(machine: str) -> dict[str, str]:
    """The variables that make `nvidia-smi` answer as `machine`'s captured outputs."""
    return _replaying(SMI_FIXTURES / machine)


def hidden_h100_env() -> dict[str, str]:
    """One H100 the driver lists (the captured VM's), and CUDA_VISIBLE_DEVICES naming a GPU it does not have."""
    return {**fake_smi_env("h100_sxm5_passthrough_vm"), "CUDA_VISIBLE_DEVICES": "7"}


def hanging_smi_env(args: str, started: Path) -> dict[str, str]:
    """`nvidia-smi ARGS` hangs once it has written `started`, as on a GPU that stopped answering; every other
    nvidia-smi command fails, as on a host whose driver answers nothing."""
    return {**_replaying(started.parent), "FAKE_NVIDIA_SMI_HANG": args, "FAKE_NVIDIA_SMI_STARTED": str(started)}


def _replaying(folder: Path) -> dict[str, str]:
    """The fake first on PATH, replaying the captures in `folder` (none there: every command fails)."""
    return {"PATH": f"{SMI_FIXTURES}{os.pathsep}{os.environ['PATH']}", "FAKE_NVIDIA_SMI_DIR": str(folder)}
