"""Link-rate arithmetic and the known-GPU table: exact values."""

import pytest

from nccl_bench.hardware.known_gpus import (
    known_gpu,
    link_rate,
    links_from_topology,
    pcie_gbps,
)


@pytest.mark.parametrize("reported, gen, data", [
    (20.0, 1, 20.0), (25.781, 2, 25.0), (25.0, 3, 25.0), (14.062, 3, 14.0625), (26.562, 4, 25.0), (53.125, 5, 50.0),
    (33.3, None, 33.3),
])
def test_link_rate(reported, gen, data):
    assert link_rate(reported) == (gen, data)


def test_pcie_per_direction():
    assert pcie_gbps(3, 16) == pytest.approx(15.7538, abs=1e-4)
    assert pcie_gbps(4, 16) == pytest.approx(31.5077, abs=1e-4)
    assert pcie_gbps(5, 16) == pytest.approx(63.0154, abs=1e-4)
    assert pcie_gbps(4, 8) == pytest.approx(pcie_gbps(4, 16) / 2)
    assert pcie_gbps(None, 16) is None and pcie_gbps(9, 16) is None


def test_links_from_topology_mesh_vs_switch():
    assert links_from_topology([6, 6, 6]) == 18  # 4x H100 direct mesh
    assert links_from_topology([12] * 7) == 12  # DGX A100 behind NVSwitch
    assert links_from_topology([18] * 7) == 18  # HGX H100
    assert links_from_topology([4, 4, 4], max_links=12) == 12
    assert links_from_topology([]) == 0


@pytest.mark.parametrize("name, label, per_direction", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 450.0),
    ("NVIDIA H100 PCIe", "H100 PCIe", 300.0),
    ("NVIDIA H200", "H200", 450.0),
    ("NVIDIA H20", "H20", 450.0),
    ("NVIDIA H800", "H800 SXM", 200.0),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4", 300.0),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", 300.0),
    ("Tesla V100-SXM2-32GB", "V100 SXM2", 150.0),
    ("NVIDIA B200", "B200", 900.0),
    ("NVIDIA GB200", "GB200", 900.0),
    ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", 56.25),
    ("GeForce RTX 2080 Ti", "TU102 (RTX 2080 Ti / TITAN RTX / Quadro RTX 6000-8000)", 50.0),
])
def test_known_gpu_per_direction_totals(name, label, per_direction):
    gpu = known_gpu(name)
    assert gpu.label == label
    assert gpu.nvlinks * gpu.link_gbps == per_direction


def test_known_gpu_without_nvlink_and_unknown():
    assert known_gpu("NVIDIA GeForce RTX 4090").nvlinks == 0
    assert known_gpu("Tesla V100-PCIE-16GB").nvlinks == 0
    assert known_gpu("Some Future GPU") is None and known_gpu(None) is None
