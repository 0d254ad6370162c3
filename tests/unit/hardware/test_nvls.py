"""NVLink SHARP named where all_reduce's busbw passes the links' peak on an NVSwitch system, read from
the recorded `nvidia-smi topo -m` outputs (tests/fixtures/nvidia_smi/README.md gives each source)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from nccl_bench.hardware.nvidia_smi import parse_topo_matrix
from nccl_bench.hardware.nvls import NVLS_FLAG, nvls_likely, probe_nvswitch, switched
from nccl_bench.render.tables import nvls_lines
from tests.helpers.rows import row

# An 8-GPU all_reduce at 1 GiB on NVSwitch, against the 450 GB/s NVLink peak.
_row = partial(row, size_bytes=2**30, dtype="float32", world_size=8, backend="nccl", iters=20, time_us=1.0, spread=0.0,
               p50_us=None, p99_us=None, busbw_factor=1.75, peak=450.0)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi"


@pytest.mark.parametrize("machine, behind_a_switch", [
    ("h100_sxm_topo", True),  # 8x H100 SXM: NV18 to each of 7 peers
    ("a100_dgx_topo_clipped", True),  # DGX A100: NV12 to each peer
    ("h100_hgx4_topo", False),  # 4x H100, direct: NV6 to each of 3 peers, 18 links in all
    ("rtx3090_no_nvlink", False),  # PCIe only
    ("h100_sxm5_passthrough_vm", None),  # one GPU: nothing to judge by
    ("h100_sxm5_firecracker_vm", None),
])
def test_a_switch_is_seen_where_every_peer_shows_all_of_a_gpus_links(machine, behind_a_switch):
    assert switched(parse_topo_matrix((FIXTURES / machine / "topo_m.txt").read_text())) is behind_a_switch


def test_the_probe_reads_the_recorded_outputs_through_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", f"{FIXTURES}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(FIXTURES / "h100_sxm_topo"))
    assert probe_nvswitch() is True
    monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(FIXTURES / "h100_hgx4_topo"))
    assert probe_nvswitch() is False
    assert probe_nvswitch("no-such-nvidia-smi") is None


def test_only_all_reduce_above_the_peak_on_a_switch_is_nvls():
    assert nvls_likely("all_reduce", 106.7, True)
    assert not nvls_likely("all_reduce", 106.7, False)  # a direct mesh: above the peak is worth a look
    assert not nvls_likely("all_reduce", 99.0, True)
    assert not nvls_likely("all_gather", 106.7, True)
    assert not nvls_likely("all_reduce", None, True)


def test_the_end_of_the_sweep_names_nvls_and_how_to_measure_the_ring():
    rows = [_row(busbw=480.0, flags=NVLS_FLAG), _row(busbw=470.0, flags=f"noisy;{NVLS_FLAG}"),
            _row(busbw=300.0, flags="")]
    [line] = nvls_lines(rows)
    assert line.startswith("# note: all_reduce busbw reaches 107% of the NVLink per-direction peak on a system "
                           "with NVSwitch: NVLink SHARP (NVLS) is the likely cause")
    assert line.endswith("NCCL_NVLS_ENABLE=0 measures the ring that busbw's formula describes")
    assert nvls_lines([_row(busbw=480.0, flags="")]) == []
