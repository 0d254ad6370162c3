"""The sweep's %peak reference: none for one rank (it crosses no link), a given --peak kept; the public
figure its largest size is compared with, recorded in meta.json, or nothing."""

from __future__ import annotations

from types import SimpleNamespace

from nccl_bench.sweep import references, sweep_body, sweep_report
from nccl_bench.sweep.sweep_config import SweepConfig


def test_one_rank_has_no_detected_peak_but_a_given_one_is_kept():
    ctx = SimpleNamespace(world_size=1, rank=0)
    assert references.reference_peak(SweepConfig(), ctx, 1) == (None, references.NO_PEAK_ONE_RANK)
    assert references.reference_peak(SweepConfig(peak_gbps=450.0), ctx, 1) == (450.0, "450 GB/s (given with --peak)")


# --- the public figure a sweep's largest size is compared with (hardware/expected.py) ------------------

H100 = "NVIDIA H100 80GB HBM3"
G = 1024**3


def _gpu_limits(count: int):
    from nccl_bench.hardware.detect import GpuLimits, HostLimits

    gpu = GpuLimits(0, H100, 4, 18, 18, 25.0, 25.0, 450.0, 5, 16, 5, 16, 63.0, 450.0, "nvml")
    return HostLimits(gpus=(gpu,) * count, source="nvml", memcpy_gbps=None, nic_ports=())


def test_the_system_is_rank_0s_on_gpus_with_the_ranks_per_node(monkeypatch):
    from nccl_bench.hardware import detect
    from nccl_bench.hardware.expected import System

    monkeypatch.setattr(detect, "detect_limits", lambda **kwargs: _gpu_limits(8))
    on_gpu = SimpleNamespace(rank=0, world_size=16, on_gpu=True)
    assert references.expected_system(on_gpu, 2) == System(H100, 8, 2, 4, ())
    assert references.expected_system(SimpleNamespace(rank=1, world_size=16, on_gpu=True), 2) is None
    assert references.expected_system(SimpleNamespace(rank=0, world_size=2, on_gpu=False), 1) is None
    assert references.expected_system(SimpleNamespace(rank=0, world_size=3, on_gpu=True), 2) is None  # uneven

    def broken(**kwargs):
        raise RuntimeError("NVML went away")

    monkeypatch.setattr(detect, "detect_limits", broken)
    assert references.expected_system(on_gpu, 2) is None  # never a reason to stop a sweep


def _closed(system, rows):
    body = sweep_body._Sweep(SweepConfig(), SimpleNamespace(notes=[]), lambda rank: sweep_report.SilentObserver())
    body.system = system
    body.summary.rows = rows
    return body.close("complete"), body.summary


def test_meta_json_records_the_entry_each_ops_largest_size_was_compared_with():
    from nccl_bench.hardware.expected import System
    from tests.helpers.rows import row

    rows = [row(size_bytes=G // 2, time_us=2000.0), row(size_bytes=G, time_us=2400.0),  # 447.4 GB/s at 1G
            row(size_bytes=G, time_us=2500.0, placement="out_of_place"), row(op="all_gather", size_bytes=G)]
    meta, summary = _closed(System(H100, 8, 1, 4, ()), rows)
    (used,) = meta["expected"]
    assert (used["op"], used["size_bytes"], used["busbw_gbps"]) == ("all_reduce", G, rows[1].busbw_gbps)
    assert (used["entry"], used["entry_busbw_gbps"], used["entry_kind"]) == (
        "azure-nd-h100-v5-all_reduce-1G", 466.35, "measured")
    assert used["source_url"].startswith("https://github.com/Azure/AI-benchmarking-guide/")
    assert summary.expected == [used["sentence"]]
    assert used["sentence"].startswith(
        "all_reduce 1G: 447.4 GB/s = 95% of the 466.35 GB/s measured with NVLS on 8xH100 SXM")
    assert (meta["rows"], meta["wrong_total"]) == (4, 0)


def test_a_run_of_rings_is_compared_with_a_ring_figure_only(monkeypatch):
    from nccl_bench.hardware.expected import System
    from tests.helpers.rows import row

    monkeypatch.setenv("NCCL_ALGO", "Ring")  # as --nccl-env NCCL_ALGO=Ring sets it in the workers
    meta, _summary = _closed(System(H100, 8, 1, 4, ()), [row(size_bytes=G, time_us=2400.0)])
    (used,) = meta["expected"]
    assert (used["entry"], used["entry_busbw_gbps"]) == ("nccl-tests-212-h100-all_reduce-ring-peak", 370.0)


def test_no_fitting_figure_records_and_says_nothing():
    from nccl_bench.hardware.expected import System
    from tests.helpers.rows import row

    for system in (None, System(H100, 4, 1, 4, ()), System("NVIDIA Z999", 8, 1, 4, ())):
        meta, summary = _closed(system, [row(size_bytes=G, time_us=2400.0)])
        assert "expected" not in meta and summary.expected == []
