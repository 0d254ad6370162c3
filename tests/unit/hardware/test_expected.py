"""Expected busbw: every figure sourced and quoted; matching on real nvidia-smi and NVML captures is
exact or silent; the sentence that compares a result with a figure."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from nccl_bench.hardware.detect import detect_limits
from nccl_bench.hardware.expected import (
    Entry,
    Nic,
    NicPortRate,
    System,
    describe,
    host_entries,
    load_entries,
    match,
    normalize_gpu_name,
    parse_entries,
    run_algorithm,
    yardsticks,
)
from nccl_bench.units.op_table import moves_data
from nccl_bench.units.sizes import format_size
from tests.unit.hardware.test_nvml_capture import CAPTURE, fake_pynvml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SMI = FIXTURES / "nvidia_smi"
G = 1024**3
H100 = "NVIDIA H100 80GB HBM3"
H100_IDS = {  # every H100 entry of the data file, whatever the size
    "azure-nd-h100-v5-all_reduce-1G", "azure-nd-h100-v5-all_reduce-8G", "nccl-tests-290-h100-all_reduce-4G",
    "nccl-tests-309-h100-all_reduce-16G", "azure-nhc-nd96isr_h100_v5-all_reduce-16G",
    "nccl-tests-212-h100-all_reduce-nvls-peak", "nccl-tests-212-h100-all_reduce-ring-peak",
}
NVLS_PEAK, RING_PEAK = "nccl-tests-212-h100-all_reduce-nvls-peak", "nccl-tests-212-h100-all_reduce-ring-peak"


def raw_data() -> dict:
    return json.loads(resources.files("nccl_bench.hardware").joinpath("expected_busbw.json").read_text())


def by_id(entry_id: str) -> Entry:
    (entry,) = [e for e in load_entries() if e.id == entry_id]
    return entry


def ids(entries: list[Entry]) -> list[str]:
    return [e.id for e in entries]


# --- the data: nothing without a source ----------------------------------------------------------------

def test_the_packaged_file_loads_with_its_schema_version():
    assert raw_data()["schema_version"] == 2
    assert len(load_entries()) == len(raw_data()["entries"]) == 16


@pytest.mark.parametrize("entry", load_entries(), ids=lambda e: e.id)
def test_every_entry_has_a_source_and_the_quote_carries_its_figure_and_size(entry):
    assert entry.source_url.startswith("https://")
    assert entry.quote and all(line.strip() for line in entry.quote)
    text = "\n".join(entry.quote)
    figure = entry.busbw_gbps
    assert any(spelling in text for spelling in (f"{figure:g}", f"{figure:.1f}", f"{figure:.2f}")), entry.id
    size = entry.size_bytes
    label = format_size(size)
    assert any(s in text for s in (label, str(size), f"{label[:-1]} {label[-1]}B")), entry.id
    assert moves_data(entry.op)
    assert entry.kind in ("measured", "threshold", "stated")
    assert entry.algorithm in ("nvls", "ring", "default")


def test_every_gpu_name_is_one_seen_in_a_source():
    seen = raw_data()["gpu_names"]
    for entry in load_entries():
        for name in entry.gpu_names:
            assert name in seen, (entry.id, name)
    for name, where in seen.items():
        assert where["seen_in"].startswith("https://") and name in where["quote"]


def test_entry_ids_are_unique_and_the_system_label_starts_with_the_gpu_count():
    entries = load_entries()
    assert len({e.id for e in entries}) == len(entries)
    assert all(e.system.startswith(f"{e.gpus_per_node}x") for e in entries if e.nodes == 1)


@pytest.mark.parametrize("change, message", [
    ({"schema_version": 1}, "schema_version 1, expected 2"),
    ({"entries": [{"algorithm": "tree"}]}, "algorithm 'tree' is not one of"),
    ({"entries": [{"kind": "guess"}]}, "kind 'guess' is not one of"),
    ({"entries": [{"nodes": 2}]}, "an entry of more than one node needs its nic"),
    ({"entries": [{"quote": []}]}, "a source_url and a quote are required"),
    ({"entries": [{"busbw_high_gbps": 1.0}]}, "busbw_high_gbps is below busbw_gbps"),
])
def test_a_malformed_file_is_refused_naming_the_entry(change, message):
    data = raw_data()
    first = data["entries"][0]
    if "entries" in change:
        data["entries"] = [{**first, **change["entries"][0]}]
    else:
        data.update(change)
    with pytest.raises(ValueError, match=message):
        parse_entries(data)


# --- matching on recorded machines ---------------------------------------------------------------------

@pytest.fixture
def fake_smi(monkeypatch):
    def use(machine: Path) -> System:
        monkeypatch.setenv("PATH", f"{SMI}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(machine))
        return System.from_limits(detect_limits(use_nvml=False, sysfs_root=machine, proc_root=machine,
                                                measure_host=False))
    return use


@pytest.fixture
def della_node(tmp_path):
    """One 8xH100 SXM node: the della cluster's `topo -m` (8 GPUs, NV18) with its `-q` (the product name);
    the two outputs come from two nodes of the same cluster (tests/fixtures/nvidia_smi/README.md)."""
    machine = tmp_path / "della"
    machine.mkdir()
    (machine / "topo_m.txt").write_text((SMI / "h100_sxm_topo" / "topo_m.txt").read_text())
    (machine / "query.txt").write_text((SMI / "h100_sxm_query" / "query.txt").read_text())
    return machine


def test_an_8xh100_node_gets_every_h100_entry_and_no_other(fake_smi, della_node):
    system = fake_smi(della_node)
    assert system == System(H100, 8, 1, 4, ())
    assert set(ids(match(system, "all_reduce"))) == H100_IDS
    assert match(system, "all_gather") == []


def test_sizes_fit_up_to_the_largest_measured_size_closest_first_measured_before_thresholds(fake_smi, della_node):
    system = fake_smi(della_node)
    assert ids(match(system, "all_reduce", 256 * 2**20)) == []  # the stated peak is above 256M
    assert ids(match(system, "all_reduce", 512 * 2**20)) == [NVLS_PEAK]
    assert ids(match(system, "all_reduce", G)) == ["azure-nd-h100-v5-all_reduce-1G", NVLS_PEAK]
    assert ids(match(system, "all_reduce", 8 * G)) == [
        "azure-nd-h100-v5-all_reduce-8G", "nccl-tests-290-h100-all_reduce-4G", "azure-nd-h100-v5-all_reduce-1G",
        NVLS_PEAK]
    assert ids(match(system, "all_reduce", 16 * G))[:2] == [
        "nccl-tests-309-h100-all_reduce-16G", "azure-nhc-nd96isr_h100_v5-all_reduce-16G"]


@pytest.mark.parametrize("machine, name, gpus", [
    ("h100_sxm5_passthrough_vm", H100, 1),  # one H100 passed through to a VM, no NVLink visible
    ("h100_sxm5_firecracker_vm", H100, 1),  # the same in a Firecracker VM (gpu_smoke.sh, 2026-11-26)
    ("h100_sxm_query", H100, 1),
    ("h100_sxm_topo", None, 8),  # eight GPUs, but no output names them
    ("a100_sxm4_clipped", "NVIDIA A100-SXM4-80GB", 3),  # an 8-GPU node whose output was clipped after GPU 2
    ("gb200_nvl", "NVIDIA GB200", 4),
    ("v100_sxm2_inactive", "Tesla V100-SXM2-32GB", 1),
    ("rtx2080ti_bridge", "GeForce RTX 2080 Ti", 2),
    ("rtx3090_no_nvlink", None, 2),
])
def test_recorded_machines_that_fit_no_entry_get_none(fake_smi, machine, name, gpus):
    system = fake_smi(SMI / machine)
    assert (system.gpu_name, system.gpus_per_node) == (name, gpus)
    assert match(system, "all_reduce") == []


def test_the_one_gpu_h100_vm_gets_no_eight_gpu_entry_through_nvml(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(json.loads(CAPTURE.read_text())))
    limits = detect_limits(sysfs_root=tmp_path, proc_root=tmp_path, measure_host=False)
    assert limits.source == "nvml"
    system = System.from_limits(limits)
    assert system == System(H100, 1, 1, 0, ())
    assert match(system, "all_reduce") == []
    assert set(ids(match(replace(system, gpus_per_node=8, nvlink_gen=None), "all_reduce"))) == H100_IDS


def test_an_unknown_or_missing_gpu_name_gets_none():
    assert match(System("NVIDIA Z999 96GB", 8, 1, 4), "all_reduce") == []
    assert match(System(None, 8, 1, 4), "all_reduce") == []
    assert match(System("NVIDIA A100-SXM-80GB", 8, 1, 3), "all_reduce") == []  # an HGX name no entry lists


def test_names_compare_without_case_spacing_or_vendor_prefix():
    assert normalize_gpu_name("  nvidia  A100-SXM4-80GB ") == normalize_gpu_name("A100-SXM4-80GB")
    assert ids(match(System("A100-SXM4-80GB", 8, 1, 3), "all_reduce")) == [  # a pre-470 driver's name
        "azure-nhc-nd96amsr_a100_v4-all_reduce-16G", "azure-nd-a100-v4-all_reduce-8G",
        "azure-nd-a100-v4-all_reduce-1G"]
    assert ids(match(System("NVIDIA H200", 8, 1, 4), "all_reduce", 4 * G)) == [
        "nccl-tests-272-h200-all_reduce-4G", "azure-nd-h200-v5-all_reduce-1G"]


def test_gpu_count_node_count_and_nvlink_generation_must_agree():
    assert match(System(H100, 4, 1, 4), "all_reduce") == []
    assert match(System(H100, 8, 2, 4), "all_reduce") == []
    assert match(System(H100, 8, None, 4), "all_reduce") == []
    assert match(System(H100, 8, 1, 0), "all_reduce") == []  # links down: not the system that was measured
    assert match(System(H100, 8, 1, 3), "all_reduce") == []
    assert set(ids(match(System(H100, 8, 1, None), "all_reduce"))) == H100_IDS  # unknown is not checked


def test_mixed_gpus_make_the_name_and_generation_unknown(fake_smi, della_node):
    fake_smi(della_node)
    limits = detect_limits(use_nvml=False, sysfs_root=della_node, proc_root=della_node, measure_host=False)
    mixed = replace(limits, gpus=(*limits.gpus[:7], replace(limits.gpus[7], name="NVIDIA H200", nvlink_gen=3)))
    assert System.from_limits(mixed) == System(None, 8, 1, None, ())


def test_across_nodes_the_nics_must_be_the_entry_s():
    two_nodes = replace(by_id("azure-nd-h100-v5-all_reduce-8G"), id="two-nodes", nodes=2,
                        nic=Nic("InfiniBand", 8, 400.0))
    ib = tuple(NicPortRate("InfiniBand", 50.0) for _ in range(8))
    eth = (NicPortRate("Ethernet", 3.125),)  # a management port does not count against InfiniBand
    assert ids(match(System(H100, 8, 2, 4, ib + eth), "all_reduce", entries=(two_nodes,))) == ["two-nodes"]
    assert match(System(H100, 8, 2, 4, ib[:4]), "all_reduce", entries=(two_nodes,)) == []
    assert match(System(H100, 8, 2, 4, tuple(NicPortRate("InfiniBand", 25.0) for _ in range(8))), "all_reduce",
                 entries=(two_nodes,)) == []
    assert match(System(H100, 8, 2, 4, None), "all_reduce", entries=(two_nodes,)) == []


# --- the sentence --------------------------------------------------------------------------------------

def test_the_sentence_the_issue_shows():
    entry = replace(by_id("azure-nd-h100-v5-all_reduce-1G"), busbw_gbps=476.0, busbw_high_gbps=482.0,
                    system="8xH100 SXM", source_url="source", algorithm="default")
    assert describe(entry, 455.0) == "all_reduce 1G: 455 GB/s = 95% of the 476-482 GB/s measured on 8xH100 SXM (source)"


def test_sentences_for_recorded_entries():
    aib = "https://github.com/Azure/AI-benchmarking-guide/blob/8fd0c6e1bd0f853ef8f0500a3640a7d80a2a92ef/Azure_Results"
    nhc = "https://github.com/Azure/azurehpc-health-checks/blob/0e0a1ac26a64b32ac4dd7632a529638505d3314a/conf"
    assert describe(by_id("azure-nd-h100-v5-all_reduce-1G"), 455.0) == (
        "all_reduce 1G: 455 GB/s = 97% of the 466.35 GB/s measured with NVLS on 8xH100 SXM, Azure ND H100 v5 "
        f"({aib}/ND_H100_v5_results.md#L103)")
    assert describe(by_id("azure-nhc-nd96isr_h100_v5-all_reduce-16G"), 470.24, 32 * G) == (
        "all_reduce 32G: 470.2 GB/s = 102% of the 460 GB/s pass threshold at 16G for 8xH100 SXM, "
        f"Azure ND H100 v5 ({nhc}/nd96isr_h100_v5.conf#L52)")
    assert describe(by_id("nccl-tests-290-h100-all_reduce-4G"), 452.5, 4 * G) == (
        "all_reduce 4G: 452.5 GB/s = 95% of the 476 GB/s measured up to 4G on 8xH100 SXM "
        "(https://github.com/NVIDIA/nccl-tests/issues/290)")


def test_the_share_is_rounded_down():
    entry = by_id("azure-nd-h100-v5-all_reduce-1G")
    assert describe(entry, 466.2).split(" = ")[1].startswith("99% of")  # 99.97%: short of the figure
    assert describe(entry, 466.35).split(" = ")[1].startswith("100% of")


# --- a run's largest size against the closest figure ---------------------------------------------------

def test_each_op_is_compared_at_its_largest_size_with_its_best_placement():
    system = System(H100, 8, 1, 4, ())
    measured = [("all_reduce", G, 300.0), ("all_reduce", 4 * G, 440.0), ("all_reduce", 4 * G, 452.5),
                ("all_gather", 4 * G, 350.0), ("all_reduce", 2 * G, 470.0)]
    (found,) = yardsticks(system, measured)  # no figure is for all_gather: it says nothing
    assert (found.op, found.size_bytes, found.busbw_gbps, found.entry.id) == (
        "all_reduce", 4 * G, 452.5, "nccl-tests-290-h100-all_reduce-4G")
    assert found.sentence == describe(found.entry, 452.5, 4 * G)
    assert found.as_meta()["entry"] == "nccl-tests-290-h100-all_reduce-4G"
    assert yardsticks(None, measured) == [] and yardsticks(system, []) == []
    assert yardsticks(system, [("all_reduce", 256 * 2**20, 400.0)]) == []  # below every figure's size


def test_limits_matches_every_op_and_size_on_one_node_and_nothing_when_the_node_count_is_unknown(fake_smi, della_node):
    fake_smi(della_node)
    limits = detect_limits(use_nvml=False, sysfs_root=della_node, proc_root=della_node, measure_host=False)
    assert set(ids(host_entries(limits))) == H100_IDS
    assert host_entries(limits, nodes=None) == []


# --- NVLS and ring figures kept apart -------------------------------------------------------------------

def test_a_run_known_to_use_rings_meets_ring_figures_only_and_any_other_run_never():
    system = System(H100, 8, 1, 4, ())
    assert ids(match(system, "all_reduce", 512 * 2**20, algorithm="ring")) == [RING_PEAK]
    assert ids(match(system, "all_reduce", 512 * 2**20, algorithm="nvls")) == [NVLS_PEAK]
    assert RING_PEAK not in ids(match(system, "all_reduce", 16 * G, algorithm="default"))
    (ring,) = yardsticks(system, [("all_reduce", G, 365.0)], algorithm="ring")
    assert ring.sentence == ("all_reduce 1G: 365 GB/s = 98% of the 370 GB/s stated peak with rings above 256M for "
                             "8xH100 SXM (https://github.com/NVIDIA/nccl-tests/issues/212)")
    (nvls,) = yardsticks(system, [("all_reduce", 512 * 2**20, 365.0)])
    assert nvls.entry.id == NVLS_PEAK and "76% of the 480 GB/s stated peak with NVLS" in nvls.sentence


@pytest.mark.parametrize("environ, traced, algorithm", [
    ({}, (), "default"),
    ({"NCCL_ALGO": "Ring"}, (), "ring"),
    ({"NCCL_ALGO": "ring,tree"}, (), "ring"),
    ({"NCCL_ALGO": "allreduce:ring"}, (), "ring"),
    ({"NCCL_NVLS_ENABLE": "0"}, (), "ring"),
    ({"NCCL_ALGO": "Tree"}, (), "default"),
    ({}, ("RING", "RING"), "ring"),
    ({}, ("NVLS", "RING"), "nvls"),
    ({"NCCL_ALGO": "Ring"}, ("TREE",), "ring"),
])
def test_what_a_run_is_known_to_have_used(environ, traced, algorithm):
    assert run_algorithm(environ, traced) == algorithm


def test_a_gb200_nvl72_rack_is_one_nvlink_domain_and_needs_no_nic():
    rack = System("NVIDIA GB200", 4, 18, 5, ())  # 18 trays of 4 GPUs, no NIC seen
    assert ids(match(rack, "all_reduce", 8 * G)) == ["coreweave-gb200-nvl72-all_reduce-8G"]
    assert match(replace(rack, nodes=2), "all_reduce", 8 * G) == []
    assert match(rack, "all_reduce", 4 * G) == []
