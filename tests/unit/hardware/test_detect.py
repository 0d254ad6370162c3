"""Peak choice: slowest GPU, host memcpy on CPU, min(intra-node, NIC per rank) across nodes."""

from pathlib import Path

import pytest

from nccl_bench.hardware.detect import (
    GpuLimits,
    HostLimits,
    host_gpu_peak,
    peak_from_limits,
)
from nccl_bench.hardware.host import NicPort, measure_memcpy, read_nic_ports


def gpu(index, peak, links=18):
    return GpuLimits(index, "NVIDIA H100 80GB HBM3", 4, links, 18, 26.562, 25.0, peak, 5, 16, 5, 16, 63.0, peak,
                     "nvidia-smi")


def test_slowest_gpu_sets_the_peak():
    peak = host_gpu_peak((gpu(0, 450.0), gpu(1, 400.0, links=16)))
    assert peak.peak_gbps == 400.0
    assert peak.label == "NVLink4 x16 active, 25 GB/s/link/direction (26.562 GB/s signalling as reported)"


def test_unknown_gpu_peak_gives_no_peak():
    unknown = GpuLimits(1, None, None, 18, 18, None, None, None, None, None, None, None, None, None, "nvidia-smi")
    assert host_gpu_peak((gpu(0, 450.0), unknown)) is None


def test_cpu_peak_is_memcpy():
    limits = HostLimits((), None, 12.5, ())
    peak, warnings = peak_from_limits(limits, device_kind="cpu")
    assert (peak.peak_gbps, peak.source) == (12.5, "host-memcpy")
    assert warnings == []


def test_multi_node_takes_the_network_when_slower():
    ports = tuple(NicPort(f"mlx5_{i}/1", "InfiniBand", 50.0) for i in range(8))
    limits = HostLimits(tuple(gpu(i, 450.0) for i in range(8)), "nvidia-smi", None, ports)
    peak, _ = peak_from_limits(limits, multi_node=True, device_kind="cuda", ranks_per_node=8)
    assert peak.peak_gbps == 50.0  # 8 x 400 Gb/s NDR shared by 8 GPUs
    assert peak.label.startswith("inter-node NIC: InfiniBand 8 port(s), 400 GB/s")
    peak, _ = peak_from_limits(limits, multi_node=True, device_kind="cuda", ranks_per_node=1)
    assert peak.peak_gbps == 400.0


def test_multi_node_without_nics_warns_and_keeps_intra():
    limits = HostLimits((gpu(0, 450.0),), "nvidia-smi", None, ())
    peak, warnings = peak_from_limits(limits, multi_node=True, device_kind="cuda")
    assert peak.peak_gbps == 450.0
    assert any("no active InfiniBand" in w for w in warnings)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_sysfs_ib_ports(tmp_path):
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    write(port / "rate", "200 Gb/sec (4X HDR)\n")
    write(port / "state", "4: ACTIVE\n")
    write(port / "link_layer", "InfiniBand\n")
    down = tmp_path / "class" / "infiniband" / "mlx5_1" / "ports" / "1"
    write(down / "rate", "200 Gb/sec (4X HDR)\n")
    write(down / "state", "1: DOWN\n")
    roce = tmp_path / "class" / "infiniband" / "mlx5_2" / "ports" / "1"
    write(roce / "rate", "100 Gb/sec (4X EDR)\n")
    write(roce / "state", "4: ACTIVE\n")
    write(roce / "link_layer", "Ethernet\n")
    ports, warnings = read_nic_ports(tmp_path)
    assert ports == (NicPort("mlx5_0/1", "InfiniBand", 25.0), NicPort("mlx5_2/1", "RoCE", 12.5))
    assert warnings == ()


def test_sysfs_ethernet_fallback_and_bad_rate(tmp_path):
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    write(port / "rate", "fast\n")
    write(port / "state", "4: ACTIVE\n")
    eth = tmp_path / "class" / "net" / "eth0"
    write(eth / "speed", "25000\n")
    write(eth / "operstate", "up\n")
    (eth / "device").mkdir()
    write(tmp_path / "class" / "net" / "lo" / "speed", "0\n")
    ports, warnings = read_nic_ports(tmp_path)
    assert ports == (NicPort("eth0", "Ethernet", 3.125),)
    assert any("unreadable rate" in w for w in warnings)


def test_memcpy_is_measured_once_per_process():
    first = measure_memcpy()
    assert first.gbps > 0.1 and first.repeats >= 3
    assert measure_memcpy() is first


def test_memcpy_reference_is_the_fastest_copy():
    from nccl_bench.hardware.host import best_copy_gbps

    # 64 MiB in 3.2 ms is 20.97 GB/s; slower copies (other processes' traffic) do not lower it
    assert best_copy_gbps(64 * 2**20, [0.0040, 0.0032, 0.0051]) == 64 * 2**20 / 0.0032 / 1e9
    assert best_copy_gbps(1000, [0.0, 1e-6]) == 1000 / 1e-6 / 1e9  # an unmeasurable copy is ignored


def test_memcpy_copies_for_the_budget_with_a_floor_and_a_cap():
    from nccl_bench.hardware.host import keep_copying

    assert keep_copying(4, elapsed_s=5.0, budget_s=1.0, min_repeats=5, max_repeats=100)  # floor
    assert not keep_copying(5, elapsed_s=1.0, budget_s=1.0, min_repeats=5, max_repeats=100)  # budget spent
    assert keep_copying(50, elapsed_s=0.99, budget_s=1.0, min_repeats=5, max_repeats=100)
    assert not keep_copying(100, elapsed_s=0.5, budget_s=1.0, min_repeats=5, max_repeats=100)  # cap


def test_memcpy_record_keeps_the_fastest_rate_of_this_boot_only():
    from nccl_bench.hardware.host import record_key, with_record

    key = record_key("boot-1", "vm")
    assert with_record(18.5, {"key": key, "gbps": 21.9}, key) == 21.9  # an earlier, quieter run of this boot
    assert with_record(22.4, {"key": key, "gbps": 21.9}, key) == 22.4  # this run beat it
    assert with_record(18.5, {"key": record_key("boot-2", "vm"), "gbps": 21.9}, key) == 18.5  # rebooted: not ours
    assert with_record(18.5, {"key": key, "gbps": "fast"}, key) == 18.5
    assert with_record(18.5, None, key) == 18.5
    # a poisoned record (json.loads reads bare Infinity and NaN) is not a rate
    for poisoned in (float("inf"), float("nan")):
        assert with_record(18.5, {"key": key, "gbps": poisoned}, key) == 18.5


def test_measure_memcpy_reads_and_writes_the_record(tmp_path, monkeypatch):
    import json
    import socket

    from nccl_bench.hardware import host

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    boot_id = host._boot_id()
    if boot_id is None:
        pytest.skip("/proc/sys/kernel/random/boot_id is not readable here, so no record is kept")
    path = host.memcpy_record_path()
    key = host.record_key(boot_id, socket.gethostname())
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": key, "gbps": 1e6}))
    host.measure_memcpy.cache_clear()
    try:
        result = host.measure_memcpy(budget_s=0.01)
        assert result.gbps == 1e6 and 0 < result.run_gbps < 1e6  # the record wins and is left as it was
        assert json.loads(path.read_text())["gbps"] == 1e6
        path.write_text(json.dumps({"key": {**key, "boot_id": "another boot"}, "gbps": 1e6}))
        host.measure_memcpy.cache_clear()
        result = host.measure_memcpy(budget_s=0.01)
        assert result.gbps == result.run_gbps < 1e6  # a record of another boot is replaced by this run
        assert json.loads(path.read_text()) == {"key": key, "gbps": result.run_gbps}
    finally:
        host.measure_memcpy.cache_clear()


def test_a_run_with_this_boots_record_copies_only_for_the_top_up(tmp_path, monkeypatch):
    import json
    import socket

    from nccl_bench.hardware import host

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    boot_id = host._boot_id()
    if boot_id is None:
        pytest.skip("/proc/sys/kernel/random/boot_id is not readable here, so no record is kept")
    budgets: list[float] = []
    monkeypatch.setattr(host, "_copy_for", lambda budget_s: budgets.append(budget_s) or (2.0, 5))
    host.measure_memcpy.cache_clear()
    try:
        first = host.measure_memcpy()  # no record yet: the whole budget, and the record written
        host.measure_memcpy.cache_clear()
        path = host.memcpy_record_path()
        path.write_text(json.dumps({"key": host.record_key(boot_id, socket.gethostname()), "gbps": 3.0}))
        later = host.measure_memcpy()
    finally:
        host.measure_memcpy.cache_clear()
    assert budgets == [host.MEMCPY_BUDGET_S, host.MEMCPY_TOP_UP_S]
    assert (first.gbps, later.gbps, later.run_gbps) == (2.0, 3.0, 2.0)
