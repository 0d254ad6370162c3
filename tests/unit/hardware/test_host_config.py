"""The configuration phase's readers: `nvidia-smi -q` health on real captures and damaged copies of them,
RDMA ports from a sysfs tree, and the whole host read through the fake nvidia-smi."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from nccl_bench.hardware.host_config import read_host_hardware, read_rdma_ports
from nccl_bench.hardware.nvidia_smi import parse_query_facts, query_sections

SMI = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi"
VM_QUERY = (SMI / "h100_sxm5_passthrough_vm" / "query.txt").read_text()


def test_a_real_capture_gives_versions_and_a_healthy_gpu():
    facts = parse_query_facts(VM_QUERY)
    assert (facts.driver, facts.cuda) == ("580.159.04", "13.0")
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.memory_mib, gpu.ecc_mode, gpu.ecc_volatile_uncorrectable) == (
        "NVIDIA H100 80GB HBM3", 81559, "Enabled", 0)
    assert (gpu.pcie_gen_max, gpu.pcie_gen_current, gpu.pcie_width_max, gpu.pcie_width_current) == (5, 5, 16, 16)
    assert gpu.clock_reasons == () and gpu.idle  # Idle is active in the capture, and says nothing of health


def test_an_h200_capture_gives_the_facts_the_doctor_read_on_that_machine():
    """The H200 the doctor's --config-only ran on (2026-11-28) gave driver 580.159.04, 143771 MiB, ECC
    enabled, PCIe Gen5 x16 and no clock event reason but Idle; its capture must read the same."""
    facts = parse_query_facts((SMI / "h200_vm" / "query.txt").read_text())
    assert (facts.driver, facts.cuda) == ("580.159.04", "13.0")
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.memory_mib, gpu.ecc_mode, gpu.ecc_volatile_uncorrectable) == (
        "NVIDIA H200", 143771, "Enabled", 0)
    assert (gpu.pcie_gen_max, gpu.pcie_gen_current, gpu.pcie_width_max, gpu.pcie_width_current) == (5, 5, 16, 16)
    assert gpu.clock_reasons == () and gpu.idle


def test_volatile_uncorrectable_counts_add_up_and_aggregate_ones_do_not():
    damaged = VM_QUERY.replace("            DRAM Uncorrectable                         : 0\n        Aggregate",
                               "            DRAM Uncorrectable                         : 2\n        Aggregate")
    parity = "SRAM Uncorrectable Parity                  : "
    damaged = damaged.replace(parity + "0", parity + "1", 1)
    assert parse_query_facts(damaged).gpus[0].ecc_volatile_uncorrectable == 3
    aggregate_only = VM_QUERY.replace("            DRAM Uncorrectable                         : 0\n            SRAM "
                                      "Threshold", "            DRAM Uncorrectable                         : 9\n"
                                      "            SRAM Threshold")
    assert parse_query_facts(aggregate_only).gpus[0].ecc_volatile_uncorrectable == 0


def test_a_downtrained_link_and_a_hardware_slowdown_are_read():
    text = VM_QUERY.replace("                Current                                : 5\n",
                            "                Current                                : 4\n", 1)
    text = text.replace("Current                                : 16x", "Current                                : 8x")
    text = text.replace("            HW Thermal Slowdown                        : Not Active",
                        "            HW Thermal Slowdown                        : Active")
    (gpu,) = parse_query_facts(text).gpus
    assert (gpu.pcie_gen_current, gpu.pcie_width_current) == (4, 8)
    assert gpu.clock_reasons == ("HW Thermal Slowdown",)


def test_old_drivers_nest_ecc_counts_one_level_deeper_and_tabs_do_not_confuse_nesting():
    text = ("Driver Version : 470.57.02\nCUDA Version : 11.4\n\nGPU 00000000:3B:00.0\n"
            "\tProduct Name : Tesla V100-SXM2-32GB\n\tECC Mode\n\t\tCurrent : Enabled\n"
            "\tECC Errors\n\t\tVolatile\n\t\t\tSingle Bit\n\t\t\t\tTotal : 7\n"
            "\t\t\tDouble Bit\n\t\t\t\tDevice Memory : 1\n\t\t\t\tTotal : 1\n"
            "\t\tAggregate\n\t\t\tDouble Bit\n\t\t\t\tTotal : 5\n")
    facts = parse_query_facts(text)
    assert facts.driver == "470.57.02"
    assert facts.gpus[0].ecc_volatile_uncorrectable == 1
    assert facts.gpus[0].ecc_mode == "Enabled"


@pytest.mark.parametrize("text", ["", "garbage\n\x1b[31mNo devices were found\x1b[0m\n", "GPU 0000:00:01.0\n  : :\n"])
def test_unfamiliar_output_gives_nothing_and_never_raises(text):
    facts = parse_query_facts(text)
    assert facts.driver is None and all(g.ecc_volatile_uncorrectable is None for g in facts.gpus)


def test_sections_are_keyed_by_their_path():
    top, gpus = query_sections(VM_QUERY)
    assert top[("Driver Version",)] == "580.159.04"
    assert gpus[0][("ECC Errors", "Volatile", "DRAM Uncorrectable")] == "0"
    assert gpus[0][("PCI", "GPU Link Info", "Link Width", "Max")] == "16x"


def port(root: Path, name: str, state: str, rate: str | None) -> None:
    folder = root / "class" / "infiniband" / name.split("/")[0] / "ports" / name.split("/")[1]
    folder.mkdir(parents=True)
    (folder / "state").write_text(state)
    if rate is not None:
        (folder / "rate").write_text(rate)


def test_rdma_ports_are_listed_active_or_not(tmp_path):
    port(tmp_path, "mlx5_0/1", "4: ACTIVE\n", "400 Gb/sec (4X NDR)\n")
    port(tmp_path, "mlx5_1/1", "1: DOWN\n", None)
    ports = read_rdma_ports(tmp_path)
    assert [(p.name, p.state, p.rate) for p in ports] == [("mlx5_0/1", "ACTIVE", "400 Gb/sec (4X NDR)"),
                                                          ("mlx5_1/1", "DOWN", None)]
    assert read_rdma_ports(tmp_path / "none") == ()


def test_the_host_is_read_through_nvidia_smi_with_each_source_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{SMI}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(SMI / "h100_sxm5_passthrough_vm"))
    hardware = read_host_hardware(sysfs_root=tmp_path, proc_root=tmp_path, use_nvml=False)
    assert hardware.driver == ("580.159.04", "nvidia-smi -q")
    (gpu,) = hardware.gpus
    # The VM's `nvlink -s` prints nothing: no NVLink to count, so none is up or down.
    assert (gpu.nvlinks_up, gpu.nvlinks_down, gpu.sources) == (None, None, ("nvidia-smi -q",))


def test_nvlink_states_come_from_nvlink_status(tmp_path, monkeypatch):
    machine = tmp_path / "v100"
    machine.mkdir()
    (machine / "nvlink_status.txt").write_text("GPU 0: Tesla V100 (UUID: GPU-1)\n"
                                               "\t Link 0: 25.781 GB/s\n\t Link 1: <inactive>\n")
    (machine / "query.txt").write_text(VM_QUERY)
    monkeypatch.setenv("PATH", f"{SMI}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(machine))
    (gpu,) = read_host_hardware(sysfs_root=tmp_path, proc_root=tmp_path, use_nvml=False).gpus
    assert (gpu.nvlinks_up, gpu.nvlinks_down) == (1, 1)
    assert gpu.sources == ("nvidia-smi -q", "nvidia-smi nvlink -s")


def test_without_nvidia_smi_the_driver_comes_from_proc(tmp_path):
    folder = tmp_path / "driver" / "nvidia"
    folder.mkdir(parents=True)
    (folder / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5\n")
    hardware = read_host_hardware("no-such-nvidia-smi", sysfs_root=tmp_path, proc_root=tmp_path, use_nvml=False)
    assert hardware.driver == ("550.54.15", "/proc/driver/nvidia")
    assert hardware.gpus == () and "no-such-nvidia-smi not found on PATH" in hardware.notes


def test_nvml_gives_link_states_and_pcie_over_nvidia_smi(tmp_path, monkeypatch):
    """Where nvidia-ml-py answers, NVLink states and the PCIe link are NVML's (it reads the link itself);
    the rest stays nvidia-smi's. The NVML answers are NvmlGpu records, as hardware/nvml.py returns them."""
    from nccl_bench.hardware import host_config
    from nccl_bench.hardware.nvml import NvmlGpu

    answered = (NvmlGpu(0, "NVIDIA H100 80GB HBM3", (True,) * 17 + (False,), 4, 26.562, 5, 4, 16, 16),)
    monkeypatch.setattr(host_config, "probe_nvml", lambda: (answered, None))
    monkeypatch.setenv("PATH", f"{SMI}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(SMI / "h100_sxm5_passthrough_vm"))
    (gpu,) = read_host_hardware(sysfs_root=tmp_path, proc_root=tmp_path).gpus
    assert (gpu.nvlinks_up, gpu.nvlinks_down, gpu.pcie_gen_current, gpu.pcie_gen_max) == (17, 1, 4, 5)
    assert (gpu.ecc_mode, gpu.memory_mib, gpu.sources) == ("Enabled", 81559, ("nvidia-smi -q", "nvml"))


def test_a_hanging_nvidia_smi_is_given_up_and_said(tmp_path):
    """A host whose nvidia-smi hangs is a finding, not a stalled phase: the call ends at the timeout."""
    hanging = tmp_path / "bin" / "nvidia-smi"
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(0o755)
    started = time.monotonic()
    hardware = read_host_hardware(str(hanging), sysfs_root=tmp_path, proc_root=tmp_path, use_nvml=False,
                                  timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert hardware.smi.startswith(f"{hanging} -q: ") and "timed out after 0.5 seconds" in hardware.smi
    assert hardware.gpus == () and hardware.notes == (hardware.smi,)
