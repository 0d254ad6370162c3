"""Parsers against real nvidia-smi outputs (tests/fixtures/nvidia_smi) and damaged variants of them."""

from pathlib import Path

import pytest

from nccl_bench.hardware.nvidia_smi import (
    parse_ib_rate_gbps,
    parse_nvlink_status,
    parse_query,
    parse_topo_matrix,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi"


def read(machine: str, name: str) -> str:
    return (FIXTURES / machine / name).read_text()


def test_nvlink_status_inactive_links_v100():
    status = parse_nvlink_status(read("v100_sxm2_inactive", "nvlink_status.txt"))
    assert [g.index for g in status.gpus] == [3]
    gpu = status.gpus[0]
    assert gpu.name == "Tesla V100-SXM2-32GB"
    assert gpu.links == (25.781, 25.781, 25.781, None, 25.781, None)
    assert gpu.complete
    assert any("clipped before the first GPU" in w for w in status.warnings)


def test_nvlink_status_tabs_and_clipping_a100():
    status = parse_nvlink_status(read("a100_sxm4_clipped", "nvlink_status.txt"))
    assert [(g.index, len(g.links), g.complete) for g in status.gpus] == [(0, 12, True), (1, 12, True), (2, 1, False)]
    assert status.gpus[0].links == (25.0,) * 12
    assert status.gpus[0].name == "NVIDIA A100-SXM4-80GB"


def test_nvlink_status_survives_ansi_codes_and_crlf():
    text = read("rtx2080ti_bridge", "nvlink_status.txt")
    coloured = "".join(f"\x1b[1;32m{line}\x1b[0m\r\n" for line in text.splitlines())
    assert parse_nvlink_status(coloured).gpus == parse_nvlink_status(text).gpus


def test_nvlink_status_all_links_inactive_message():
    # The message as reported in https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150
    status = parse_nvlink_status("NVML:Unable to retrieve Nvlink information as all links are inActive\n")
    assert status.all_inactive and status.gpus == ()
    assert any("inactive" in w for w in status.warnings)


def test_nvlink_status_never_raises_on_garbage():
    status = parse_nvlink_status("Link 0: 25 GB/s\nGPU x: ???\n\x00\x1b[\nGPU 0: X\n Link 1: fast\n")
    assert [g.index for g in status.gpus] == [0]
    assert status.gpus[0].links == (None,)
    assert any("unreadable state" in w for w in status.warnings)


def test_topo_nvswitch_and_tabs_h100():
    topo = parse_topo_matrix(read("h100_sxm_topo", "topo_m.txt"))
    assert topo.gpu_count == 8
    assert all(g.nv_counts == (18,) * 7 and g.complete for g in topo.gpus)
    assert topo.warnings == ()


def test_topo_direct_mesh_h100_nv6():
    topo = parse_topo_matrix(read("h100_hgx4_topo", "topo_m.txt"))
    assert [g.nv_counts for g in topo.gpus] == [(6, 6, 6)] * 4


def test_topo_no_nvlink_tabs():
    topo = parse_topo_matrix(read("rtx3090_no_nvlink", "topo_m.txt"))
    assert [(g.index, g.nv_counts) for g in topo.gpus] == [(0, (0,)), (1, (0,))]


def test_topo_clipped_mid_row():
    topo = parse_topo_matrix(read("a100_dgx_topo_clipped", "topo_m.txt"))
    assert topo.gpu_count == 8
    assert [g.complete for g in topo.gpus] == [True] * 6 + [False]
    assert topo.gpus[0].nv_counts == (12,) * 7
    assert any("GPU6 is clipped" in w for w in topo.warnings)
    assert any("1 GPU row(s) missing" in w for w in topo.warnings)


def test_topo_without_header_warns():
    topo = parse_topo_matrix("nothing useful\n")
    assert topo.gpus == () and topo.warnings


@pytest.mark.parametrize("machine, bus_id", [
    ("h100_sxm_query", "00000000:19:00.0"),  # `nvidia-smi -a`, abridged
    ("h100_sxm5_passthrough_vm", "00000000:00:06.0"),  # `-q`, unabridged, driver 580.159.04
    ("h100_sxm5_firecracker_vm", "00000000:00:06.0"),  # the same, from gpu_smoke.sh's captures
])
def test_query_pcie_section_h100(machine, bus_id):
    gpus, warnings = parse_query(read(machine, "query.txt"))
    assert warnings == ()
    assert len(gpus) == 1
    gpu = gpus[0]
    assert (gpu.name, gpu.bus_id) == ("NVIDIA H100 80GB HBM3", bus_id)
    assert (gpu.pcie_gen_max, gpu.pcie_gen_current, gpu.pcie_width_max, gpu.pcie_width_current) == (5, 5, 16, 16)


def test_query_unfamiliar_text_warns():
    gpus, warnings = parse_query("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert gpus == () and warnings


def test_ib_rate():
    assert parse_ib_rate_gbps("200 Gb/sec (4X HDR)\n") == 25.0
    assert parse_ib_rate_gbps("400 Gb/sec (4X NDR)") == 50.0
    assert parse_ib_rate_gbps("unknown") is None
