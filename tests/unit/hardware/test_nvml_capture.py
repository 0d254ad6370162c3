"""The NVML path end to end on a real capture: a fake pynvml built from what nvidia-ml-py answered on
an H100 passed through to a VM (tests/fixtures/nvml/), run through hardware/nvml.py and detect.py."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from nccl_bench.hardware import nvml
from nccl_bench.hardware.detect import detect_limits, peak_from_limits
from nccl_bench.hardware.known_gpus import pcie_gbps

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "nvml" / "h100_sxm5_passthrough_vm.json"


def fake_pynvml(capture: dict) -> types.ModuleType:
    """A pynvml whose constants, answers and errors (with their codes) are the recorded ones."""
    module = types.ModuleType("pynvml")
    vars(module).update(capture["constants"])

    class NVMLError(Exception):
        def __init__(self, text: str, code: int | None):
            super().__init__(text)
            self.value = code

    module.NVMLError = NVMLError
    gpus = capture["gpus"]
    module.NVML_NVLINK_MAX_LINKS = gpus[0]["NVML_NVLINK_MAX_LINKS"]

    def answer(recorded: dict):
        if "error" in recorded:
            raise NVMLError(recorded["error"], recorded.get("code"))
        return recorded["value"]

    def getter(name: str):
        return lambda handle: answer(gpus[handle][name])

    for name, recorded in gpus[0].items():
        if name.startswith("nvmlDevice") and ("value" in recorded or "error" in recorded):
            setattr(module, name, getter(name))

    def link_answer(name: str):
        def call(handle: int, link: int):
            links = gpus[handle]["links"]
            if link >= len(links):  # not recorded: the probe stopped where every answer was the same
                raise NVMLError("NVMLError_NotSupported: Not Supported", 3)
            return answer(links[link][name])
        return call

    module.nvmlDeviceGetNvLinkState = link_answer("nvmlDeviceGetNvLinkState")
    module.nvmlDeviceGetNvLinkVersion = link_answer("nvmlDeviceGetNvLinkVersion")

    def field_values(handle: int, ids: list[int]):
        recorded = {f["fieldId"]: f for f in gpus[handle]["fields"].values()}
        return [types.SimpleNamespace(fieldId=i, nvmlReturn=recorded[i]["nvmlReturn"],
                                      value=types.SimpleNamespace(uiVal=recorded[i]["uiVal"])) for i in ids]

    module.nvmlDeviceGetFieldValues = field_values
    module.nvmlInit = module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetCount = lambda: capture["system"]["nvmlDeviceGetCount"]["value"]
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    return module


@pytest.fixture
def capture() -> dict:
    return json.loads(CAPTURE.read_text())


@pytest.fixture
def recorded_nvml(monkeypatch, capture):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(capture))


def test_the_capture_is_what_the_fixture_readme_says(capture):
    """The facts the tests below rest on, read from the raw capture."""
    (gpu,) = capture["gpus"]
    assert gpu["nvmlDeviceGetName"]["value"] == "NVIDIA H100 80GB HBM3"
    assert all(link["nvmlDeviceGetNvLinkState"]["code"] == 3 for link in gpu["links"])  # NotSupported
    assert gpu["fields"]["NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON"]["fieldId"] == 90
    assert gpu["fields"]["NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON"]["nvmlReturn"] == 3
    assert capture["constants"]["NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON"] == 90


def test_probe_reads_no_link_and_pcie_gen5_x16(recorded_nvml):
    gpus, reason = nvml.probe_nvml()
    assert reason is None
    assert gpus == (nvml.NvmlGpu(index=0, name="NVIDIA H100 80GB HBM3", link_states=(), nvlink_gen=None,
                                 link_reported_gbps=None, pcie_gen_max=5, pcie_gen_current=5,
                                 pcie_width_max=16, pcie_width_current=16),)


def test_detect_gives_the_pcie_peak_and_names_only_nvml(recorded_nvml, tmp_path):
    limits = detect_limits(sysfs_root=tmp_path, proc_root=tmp_path, measure_host=False)
    (gpu,) = limits.gpus
    assert limits.source == "nvml" and gpu.source == "nvml"  # the known-GPU table's rate is not used
    assert (gpu.links_active, gpu.nvlink_gen, gpu.link_gbps) == (0, None, None)
    peak, warnings = peak_from_limits(limits, device_kind="cuda")
    assert round(peak.peak_gbps, 2) == 63.02 and peak.peak_gbps == pcie_gbps(5, 16) == 32 * 128 / 130 / 8 * 16
    assert (peak.source, peak.label) == ("nvml", "PCIe Gen5 x16, per direction (no active NVLink)")
    assert warnings == []


def test_an_active_link_speed_field_is_megabytes_per_second_per_link(monkeypatch, capture):
    """The same GPU as if its 18 links were up: NVML's common speed 26562 MBps is nvidia-smi's 26.562 GB/s
    per link and direction, the NVLink 4 signalling rate whose data rate is 25 GB/s."""
    gpu = capture["gpus"][0]
    gpu["links"] = [{"link": i, "nvmlDeviceGetNvLinkState": {"value": 1},
                     "nvmlDeviceGetNvLinkVersion": {"value": 7}} for i in range(18)]  # 5.0, as some drivers say
    gpu["links"].append({"link": 18, "nvmlDeviceGetNvLinkState": {"error": "NVMLError_InvalidArgument", "code": 2},
                         "nvmlDeviceGetNvLinkVersion": {"error": "NVMLError_InvalidArgument", "code": 2}})
    gpu["fields"]["NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON"].update(nvmlReturn=0, uiVal=26562)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(capture))
    (probed,), _ = nvml.probe_nvml()
    assert (len(probed.link_states), probed.link_reported_gbps, probed.nvlink_gen) == (18, 26.562, 5)
    (limits,) = detect_limits(sysfs_root="/nonexistent", proc_root="/nonexistent", measure_host=False).gpus
    # the rate says NVLink 4 more surely than the version enum
    assert (limits.nvlink_gen, limits.link_gbps, limits.peak_gbps, limits.source) == (4, 25.0, 450.0, "nvml")


@pytest.mark.parametrize(("enum", "generation"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 5), (8, 6)])
def test_nvlink_version_enum_maps_to_generation(enum, generation):
    assert nvml._NVML_VERSION_TO_GEN[enum] == generation


# gpu_smoke.sh's `nvml-dump` (benchmarks/gpu_smoke_checks.py) keeps fewer answers than the probe's
# capture: no module constants, no error codes, the link speed field under its own key. The dump from
# the smoke's run on an H100 in a Firecracker VM (2026-11-26, the same nvidia-ml-py 13.610.43) is
# read through the same fake here, with the constants of that version taken from the capture above
# and each error's code from its NVMLError name.
SMOKE_DUMP = CAPTURE.with_name("h100_sxm5_firecracker_vm.smoke_dump.json")
NVML_ERROR_CODES = {"NVMLError_InvalidArgument": 2, "NVMLError_NotSupported": 3}


def capture_from_smoke_dump(dump: dict, constants: dict) -> dict:
    def recorded(answer):
        if isinstance(answer, dict) and "error" in answer:
            return {"error": answer["error"], "code": NVML_ERROR_CODES[answer["error"].split(":")[0]]}
        return {"value": answer}

    gpus = []
    for gpu in dump["gpus"]:
        speed = gpu["nvlink_speed_mbps_common"]
        entry = {name: recorded(value) for name, value in gpu.items() if name.startswith("nvmlDevice")}
        entry.update(nvmlDeviceGetName=recorded(gpu["name"]), NVML_NVLINK_MAX_LINKS=len(gpu["links"]),
                     links=[{"link": i, "nvmlDeviceGetNvLinkState": recorded(link["state"]),
                             "nvmlDeviceGetNvLinkVersion": recorded(link["version"])}
                            for i, link in enumerate(gpu["links"])],
                     fields={"NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON": {
                         "fieldId": constants["NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON"],
                         "nvmlReturn": speed["nvmlReturn"], "uiVal": speed["value_ui"]}})
        gpus.append(entry)
    return {"constants": constants, "system": {"nvmlDeviceGetCount": {"value": len(gpus)}}, "gpus": gpus}


@pytest.mark.parametrize("dump_name, name", [
    ("h100_sxm5_firecracker_vm.smoke_dump.json", "NVIDIA H100 80GB HBM3"),  # another H100 VM, 2026-11-26
    ("h200_vm.smoke_dump.json", "NVIDIA H200"),  # an H200 VM, 2026-11-28: no NVLink either, the peak is PCIe
])
def test_the_smoke_s_dumps_of_other_vms_read_as_the_probe_s_capture(monkeypatch, capture, dump_name, name):
    dump = json.loads(SMOKE_DUMP.with_name(dump_name).read_text())
    assert dump["errors"] == [] and dump["driver"] == "580.159.04"
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(capture_from_smoke_dump(dump, capture["constants"])))
    (gpu,), reason = nvml.probe_nvml()
    assert reason is None
    assert gpu == nvml.NvmlGpu(index=0, name=name, link_states=(), nvlink_gen=None,
                               link_reported_gbps=None, pcie_gen_max=5, pcie_gen_current=5,
                               pcie_width_max=16, pcie_width_current=16)
    peak, warnings = peak_from_limits(detect_limits(sysfs_root="/nonexistent", proc_root="/nonexistent",
                                                    measure_host=False), device_kind="cuda")
    assert (round(peak.peak_gbps, 2), peak.source, warnings) == (63.02, "nvml", [])
