"""Real detection through a fake `nvidia-smi` (first on PATH) replaying captured outputs; the CLI."""

import json
import os

import pytest

from nccl_bench.hardware.detect import detect_limits, host_gpu_peak
from tests.helpers.fake_smi import SMI_FIXTURES, fake_smi_env
from tests.helpers.launch import run_cli

FIXTURES = SMI_FIXTURES


@pytest.fixture
def fake_smi(monkeypatch):
    def use(machine: str) -> None:
        for name, value in fake_smi_env(machine).items():
            monkeypatch.setenv(name, value)
    return use


def detect(tmp_path):
    return detect_limits(use_nvml=False, sysfs_root=tmp_path, proc_root=tmp_path, measure_host=False)


@pytest.mark.parametrize("machine, gpus, per_gpu, peak", [
    ("v100_sxm2_inactive", [3], [100.0], 100.0),  # NVLink2: 4 of 6 links up x 25
    ("a100_sxm4_clipped", [0, 1, 2], [300.0] * 3, 300.0),  # NVLink3: 12 x 25
    ("h100_sxm_query", [0], [450.0], 450.0),  # NVLink4: name from -q, 18 x 25 from the table
    ("gb200_nvl", [0, 1, 2, 3], [900.0] * 4, 900.0),  # NVLink5: 18 x 50
    ("rtx2080ti_bridge", [2, 3], [50.0, 50.0], 50.0),  # PCIe cards + bridge: 2 x 25
])
def test_per_direction_peaks_from_real_outputs(fake_smi, tmp_path, machine, gpus, per_gpu, peak):
    fake_smi(machine)
    limits = detect(tmp_path)
    assert limits.source == "nvidia-smi"
    assert [g.index for g in limits.gpus] == gpus
    assert [g.peak_gbps for g in limits.gpus] == per_gpu
    assert host_gpu_peak(limits.gpus).peak_gbps == peak


def test_inactive_links_do_not_count(fake_smi, tmp_path):
    fake_smi("v100_sxm2_inactive")
    (gpu,) = detect(tmp_path).gpus
    assert (gpu.links_active, gpu.links_total, gpu.link_reported_gbps, gpu.link_gbps) == (4, 6, 25.781, 25.0)


def test_clipped_gb200_uses_topology_for_hidden_links(fake_smi, tmp_path):
    fake_smi("gb200_nvl")
    limits = detect(tmp_path)
    assert [g.links_active for g in limits.gpus] == [18, 18, 18, 18]
    assert any("GPU 1: link list clipped, link count taken from topo -m (18)" in w for w in limits.warnings)


def test_pcie_from_query(fake_smi, tmp_path):
    fake_smi("h100_sxm_query")
    (gpu,) = detect(tmp_path).gpus
    assert (gpu.pcie_gen, gpu.pcie_width) == (5, 16)
    assert gpu.pcie_gbps == pytest.approx(63.0154, abs=1e-4)


def test_no_nvlink_and_no_model_gives_no_peak_with_warning(fake_smi, tmp_path):
    fake_smi("rtx3090_no_nvlink")
    limits = detect(tmp_path)
    assert [(g.links_active, g.nvlink_gbps, g.peak_gbps) for g in limits.gpus] == [(0, 0.0, None)] * 2
    assert host_gpu_peak(limits.gpus) is None
    assert any("no NVLink or PCIe rate known" in w for w in limits.warnings)


def test_switch_topology_without_model_counts_links_but_no_rate(fake_smi, tmp_path):
    fake_smi("h100_sxm_topo")
    limits = detect(tmp_path)
    assert [g.links_active for g in limits.gpus] == [18] * 8
    assert host_gpu_peak(limits.gpus) is None


def test_all_inactive_message_falls_back_to_pcie(fake_smi, tmp_path):
    machine = tmp_path / "machine"
    machine.mkdir()
    (machine / "nvlink_status.txt").write_text("NVML:Unable to retrieve Nvlink information as all links are inActive\n")
    (machine / "query.txt").write_text((FIXTURES / "h100_sxm_query" / "query.txt").read_text())
    fake_smi("h100_sxm_query")
    os.environ["FAKE_NVIDIA_SMI_DIR"] = str(machine)
    (gpu,) = detect(tmp_path).gpus
    assert gpu.links_active == 0
    assert gpu.peak_gbps == pytest.approx(63.0154, abs=1e-4)


def _limits(*args, path_prefix=None, fixture=None, columns=None):
    env = {}
    if path_prefix:
        env["PATH"] = f"{path_prefix}{os.pathsep}{os.environ['PATH']}"
    if fixture:
        env["FAKE_NVIDIA_SMI_DIR"] = str(FIXTURES / fixture)
    if columns:
        env["COLUMNS"] = columns
    return run_cli(["limits", *args], env=env)


def test_cli_without_gpu_reports_memcpy():
    done = _limits("--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    if data["gpus"]:
        pytest.skip("this host has a GPU")
    assert data["peak"]["source"] == "host-memcpy"
    assert data["peak"]["peak_gbps"] == data["memcpy_gbps"] > 0
    text = _limits()
    assert "No NVIDIA GPU found" in text.stdout and "Host memory copy" in text.stdout


def test_cli_table_with_fake_nvidia_smi():
    done = _limits("--json", path_prefix=FIXTURES, fixture="v100_sxm2_inactive")
    data = json.loads(done.stdout)
    if data["source"] == "nvml":
        pytest.skip("real NVML present")
    assert data["peak"]["peak_gbps"] == 100.0
    assert data["gpus"][0]["links_active"] == 4
    text = _limits(path_prefix=FIXTURES, fixture="v100_sxm2_inactive")
    assert "Tesla V100-SXM2-32GB" in text.stdout and "100.00" in text.stdout


def test_h100_passed_through_to_a_vm_without_nvlink_gets_its_pcie_peak(fake_smi, tmp_path):
    """This project's own capture: `nvlink -s` prints nothing, `topo -m` shows one GPU and no NV#."""
    fake_smi("h100_sxm5_passthrough_vm")
    limits = detect(tmp_path)
    (gpu,) = limits.gpus
    assert (gpu.name, gpu.links_active, gpu.pcie_gen, gpu.pcie_width) == ("NVIDIA H100 80GB HBM3", 0, 5, 16)
    assert gpu.source == "nvidia-smi"  # the known-GPU table's 18 links x 25 GB/s are not what the VM has
    peak = host_gpu_peak(limits.gpus)
    assert round(peak.peak_gbps, 2) == 63.02 and peak.label == "PCIe Gen5 x16, per direction (no active NVLink)"


H100_ENTRIES = ["azure-nd-h100-v5-all_reduce-1G", "azure-nd-h100-v5-all_reduce-8G", "nccl-tests-290-h100-all_reduce-4G",
                "nccl-tests-309-h100-all_reduce-16G", "azure-nhc-nd96isr_h100_v5-all_reduce-16G",
                "nccl-tests-212-h100-all_reduce-nvls-peak", "nccl-tests-212-h100-all_reduce-ring-peak"]


def test_an_8xh100_node_shows_the_public_figures_with_their_sources_beside_the_peak(tmp_path):
    """One 8xH100 SXM node (the della captures: `topo -m` with 8 GPUs on NV18, `-q` naming the product)."""
    machine = tmp_path / "della"
    machine.mkdir()
    (machine / "topo_m.txt").write_text((FIXTURES / "h100_sxm_topo" / "topo_m.txt").read_text())
    (machine / "query.txt").write_text((FIXTURES / "h100_sxm_query" / "query.txt").read_text())
    done = _limits("--json", path_prefix=FIXTURES, fixture=machine)
    data = json.loads(done.stdout)
    if data["source"] == "nvml":
        pytest.skip("real NVML present")
    assert data["peak"]["peak_gbps"] == 450.0
    assert sorted(e["id"] for e in data["expected"]) == sorted(H100_ENTRIES)
    (aib_1g,) = [e for e in data["expected"] if e["id"] == "azure-nd-h100-v5-all_reduce-1G"]
    assert (aib_1g["busbw_gbps"], aib_1g["size_bytes"], aib_1g["kind"], aib_1g["nccl_version"]) == (
        466.35, 1024**3, "measured", "2.18.5")
    assert aib_1g["source_url"].startswith("https://github.com/Azure/AI-benchmarking-guide/")
    text = _limits(path_prefix=FIXTURES, fixture=machine, columns="400").stdout
    lines = text.splitlines()
    heading = lines.index("Measured on such systems (public figures, busbw; GB/s = 1e9 B/s):")
    assert lines[heading - 1].startswith("Peak to compare busbw with: 450.00 GB/s")
    figures = lines[heading + 1:heading + 8]
    line = (f"  all_reduce 1G: 466.35 GB/s measured with NVLS, 8xH100 SXM, Azure ND H100 v5, NCCL 2.18.5 "
            f"({aib_1g['source_url']})")
    assert line in figures
    assert sum("https://" in line for line in figures) == 7
    # NVLS and ring figures listed apart, each with its source
    assert ("  all_reduce 256M (reached above it): 480 GB/s stated peak with NVLS, 8xH100 SXM "
            "(https://github.com/NVIDIA/nccl-tests/issues/212)") in figures
    assert ("  all_reduce 256M (reached above it): 370 GB/s stated peak with rings, 8xH100 SXM "
            "(https://github.com/NVIDIA/nccl-tests/issues/212)") in figures
    (ring,) = [e for e in data["expected"] if e["id"] == "nccl-tests-212-h100-all_reduce-ring-peak"]
    assert (ring["algorithm"], ring["kind"], ring["size_basis"]) == ("ring", "stated", "peak")
    assert any(line.startswith("  all_reduce 16G: 460 GB/s pass threshold") for line in figures)
    multi = json.loads(_limits("--json", "--multi-node", path_prefix=FIXTURES, fixture=machine).stdout)
    assert multi["expected"] == []  # how many nodes is unknown here: no figure fits for sure


def test_a_system_no_figure_fits_shows_none():
    data = json.loads(_limits("--json", path_prefix=FIXTURES, fixture="v100_sxm2_inactive").stdout)
    if data["source"] == "nvml":
        pytest.skip("real NVML present")
    assert data["expected"] == []
    assert "Measured on such systems" not in _limits(path_prefix=FIXTURES, fixture="v100_sxm2_inactive").stdout
