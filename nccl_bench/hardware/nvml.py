"""NVML probe: link states, NVLink generation and speed, PCIe generation and width per GPU.

Needs nvidia-ml-py (the `[nvml]` extra) and a driver; without them it returns None and the reason,
and detection falls back to nvidia-smi.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

from nccl_bench.hardware.nvidia_smi import ListedGpu

T = TypeVar("T")


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    name: str | None
    link_states: tuple[bool, ...]  # one per link index NVML answers for
    nvlink_gen: int | None
    link_reported_gbps: float | None  # NVML's common per-link speed, per direction
    pcie_gen_max: int | None
    pcie_gen_current: int | None
    pcie_width_max: int | None
    pcie_width_current: int | None


# nvmlNvlinkVersion_t -> NVLink generation (2.2 and 3.1 are revisions of 2 and 3). The enum in
# nvml.h: NVML_NVLINK_VERSION_INVALID 0, _1_0 1, _2_0 2, _2_2 3, _3_0 4, _3_1 5, _4_0 6, _5_0 7,
# and _6_0 8 in the newest headers (same values in nvidia-ml-py's pynvml.py).
_NVML_VERSION_TO_GEN = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
# nvml.h: "#define NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON 90 //!< Common NVLink Speed in MBps for active
# links": one link's speed, in 1e6 bytes/s, the figure nvidia-smi prints per link (e.g. 26.562 GB/s
# on H100), which is per direction. NVML answers it only when some link is active.
MBPS_PER_GBPS = 1000


def probe_nvml() -> tuple[tuple[NvmlGpu, ...] | None, str | None]:
    """GPUs through NVML (nvidia-ml-py); (None, reason) when NVML is not installed or not usable."""
    return _each_gpu(_nvml_gpu)


def list_nvml_gpus() -> tuple[tuple[ListedGpu, ...] | None, str | None]:
    """The GPUs NVML counts, with their names and UUIDs; (None, reason) when NVML is not usable."""
    return _each_gpu(_listed)


def _each_gpu(read: Callable[[object, int], T]) -> tuple[tuple[T, ...] | None, str | None]:
    """read(pynvml, index) of every GPU NVML counts, between NVML's init and shutdown."""
    try:
        import pynvml
    except ImportError:
        return None, "NVML: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses, or OSError from a broken library
        return None, f"NVML: {exc}"
    try:
        return tuple(read(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())), None
    except Exception as exc:
        return None, f"NVML: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _nvml_gpu(pynvml, index: int) -> NvmlGpu:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    name = pynvml.nvmlDeviceGetName(handle)
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    states: list[bool] = []
    versions: list[int] = []
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            active = pynvml.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED
        except pynvml.NVMLError:
            break  # past this GPU's last link, or no NVLink at all
        states.append(bool(active))
        if active:
            try:
                versions.append(pynvml.nvmlDeviceGetNvLinkVersion(handle, link))
            except pynvml.NVMLError:
                pass
    speed = None
    if any(states):
        try:
            field = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON])[0]
            if field.nvmlReturn == pynvml.NVML_SUCCESS:
                speed = float(field.value.uiVal) / MBPS_PER_GBPS
        except (pynvml.NVMLError, AttributeError, IndexError):
            pass
    return NvmlGpu(
        index=index, name=name, link_states=tuple(states),
        nvlink_gen=_NVML_VERSION_TO_GEN.get(max(versions)) if versions else None,
        link_reported_gbps=speed or None,
        pcie_gen_max=_nvml_int(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        pcie_gen_current=_nvml_int(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        pcie_width_max=_nvml_int(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        pcie_width_current=_nvml_int(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
    )


def _nvml_int(getter, handle) -> int | None:
    try:
        return int(getter(handle))
    except Exception:
        return None


def _listed(pynvml, index: int) -> ListedGpu:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    name, uuid = (_nvml_text(getter, handle) for getter in (pynvml.nvmlDeviceGetName, pynvml.nvmlDeviceGetUUID))
    return ListedGpu(index, name, uuid)


def _nvml_text(getter, handle) -> str | None:
    """A string NVML answers (bytes in older nvidia-ml-py); None when it cannot."""
    try:
        text = getter(handle)
    except Exception:
        return None
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)
