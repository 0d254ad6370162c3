"""The versions of torch, of the CUDA it was built with and of the NCCL it would load, read without
importing torch (whose import costs a rank ~2 s of CPU: at 64 ranks on a few cores, most of a
configuration check). Each answer names its source, as the configuration facts do.

- torch: `__version__` of torch/version.py, read as below: torch.__version__ itself, with the build's
  local tag ("2.11.0+cu130"), which the package metadata of PyPI's CUDA wheels leaves out ("2.11.0",
  seen on an H200); the metadata (importlib.metadata) only where version.py cannot be read.
- CUDA: torch/version.py, read as text and parsed (ast), never executed: its `cuda` assignment is
  what torch.version.cuda returns (None for a CPU build).
- NCCL: ncclGetVersion of the libnccl.so that torch's start-up preloads, the nvidia-nccl wheel's, found
  where torch/__init__.py (_get_cuda_dep_paths) looks in each sys.path entry: nvidia/nccl/lib, then
  nvidia/cu<CUDA major>/lib (the CUDA 13 wheels' layout), then nccl/lib; loaded with ctypes.
  A torch that links NCCL into libtorch_cuda.so has no such file: "unknown", with that reason.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

SOURCE_METADATA = "torch's package metadata"
SOURCE_VERSION_PY = "torch/version.py"
NCCL_WHEEL_LIB = Path("nvidia") / "nccl" / "lib"  # the nvidia-nccl-cu12 wheel's folder, in a sys.path entry
NCCL_LIBRARY = NCCL_WHEEL_LIB / "libnccl.so.2"
NCCL_LIBRARY_GLOB = "libnccl.so.*[0-9]"
SOURCE_NCCL_CALL = "ncclGetVersion of the libnccl.so torch preloads"
# NCCL_VERSION_CODE (nccl.h): major*10000 + minor*100 + patch since 2.9, major*1000 + ... before.
NEW_CODE_FROM = 20900


def torch_dir() -> Path | None:
    """Where torch is installed; found by the import system without importing it (None: not installed)."""
    spec = importlib.util.find_spec("torch")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def torch_version() -> tuple[str, str]:
    """(torch's version as torch.__version__ says it, its source): version.py's `__version__`, which carries
    the build's local tag ("2.11.0+cu130") that the package metadata may not ("2.11.0" on PyPI's CUDA
    wheels); the metadata only where version.py cannot be read."""
    version = _version_py_value("__version__")
    if version is not None:
        return version, SOURCE_VERSION_PY
    try:
        return importlib.metadata.version("torch"), SOURCE_METADATA
    except importlib.metadata.PackageNotFoundError:
        return "unknown (torch is not installed)", SOURCE_METADATA


def version_py_value(version_py: str, name: str) -> str | None:
    """The constant version.py's text assigns to `name` (torch.version.<name>), as a string; None where it
    assigns None or nothing."""
    for node in ast.parse(version_py).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == name and isinstance(node.value, ast.Constant):
            return None if node.value.value is None else str(node.value.value)
    return None


def torch_cuda_build() -> str | None:
    """The CUDA this torch was built with (None: a CPU build, or no torch)."""
    return _version_py_value("cuda")


def _version_py_value(name: str) -> str | None:
    """`name` of the installed torch's version.py, read as text (None: no torch, or no such value)."""
    where = torch_dir()
    try:
        return version_py_value((where / "version.py").read_text(), name) if where is not None else None
    except (OSError, SyntaxError, ValueError):
        return None


def nccl_text(code: int) -> str:
    """NCCL_VERSION_CODE as torch.cuda.nccl.version() joins it: 22105 -> "2.21.5", 2708 -> "2.7.8"."""
    if code >= NEW_CODE_FROM:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def nccl_library(search: list[str] | None = None, cuda_major: str | None = None) -> Path | None:
    """The nvidia-nccl wheel's library in the first sys.path entry that holds one, in the folders torch's
    start-up searches (module docstring); cuda_major: of torch's CUDA build (None: read it)."""
    if cuda_major is None:
        cuda_major = (torch_cuda_build() or "").split(".")[0]
    folders = [NCCL_WHEEL_LIB, *([Path("nvidia") / f"cu{cuda_major}" / "lib"] if cuda_major else []),
               Path("nccl") / "lib"]
    for entry in sys.path if search is None else search:
        for folder in folders:
            found = sorted((Path(entry or ".") / folder).glob(NCCL_LIBRARY_GLOB))
            if found:
                return found[0]
    return None


def nccl_version(search: list[str] | None = None) -> tuple[str, str]:
    """(the NCCL version torch would load, its source); "unknown (why)" when it cannot be read."""
    library = nccl_library(search)
    if library is None:
        return ("unknown (no libnccl.so where torch's start-up looks for it: this torch may link NCCL into "
                "its own libraries)", SOURCE_NCCL_CALL)
    code = ctypes.c_int(0)
    try:
        status = ctypes.CDLL(str(library)).ncclGetVersion(ctypes.byref(code))
    except (OSError, AttributeError) as exc:
        return f"unknown ({library}: {exc})", SOURCE_NCCL_CALL
    if status != 0:
        return f"unknown ({library}: ncclGetVersion returned {status})", SOURCE_NCCL_CALL
    return nccl_text(code.value), SOURCE_NCCL_CALL
