"""The configuration phase's verdicts: a value against the fleet's majority, degraded GPUs whatever the
fleet says, the exclude list, and the facts a host contributes (masked where secret)."""

from __future__ import annotations

from dataclasses import replace

from nccl_bench.doctor import config_facts
from nccl_bench.doctor.config_check import Fact, HostFacts, fleet_wide_notes, judge_config, summary_line
from nccl_bench.doctor.config_facts import environment_facts, hardware_facts
from nccl_bench.doctor.roster import excluded_hosts
from nccl_bench.hardware.host_config import GpuHealth, HostHardware, RdmaPort

HEALTHY = GpuHealth(0, "NVIDIA H100 80GB HBM3", 81559, "Enabled", 0, 18, 0, 5, 5, 16, 16, False, (),
                    ("nvidia-smi -q",))


def host(name: str, gpus=(HEALTHY,), **facts: str) -> HostFacts:
    base = {"driver": "580.159.04", "nccl": "2.27.5", "env NCCL_SOCKET_IFNAME": "eth0"}
    base.update(facts)
    return HostFacts(name, {k: Fact(v, "test") for k, v in base.items()}, tuple(gpus))


def fleet(count: int = 4) -> list[HostFacts]:
    return [host(f"node{i:03d}") for i in range(1, count + 1)]


def lines(hosts, expected=None) -> list[str]:
    return [s.line() for s in judge_config(hosts, expected)]


def test_an_identical_fleet_raises_nothing():
    assert judge_config(fleet(6)) == []


def test_a_different_value_names_its_host_in_one_line():
    hosts = fleet()
    hosts[3] = host("node004", driver="580.65.06")
    assert lines(hosts) == ["config node004: driver 580.65.06, 3 others 580.159.04"]


def test_a_variable_set_on_one_host_only_is_a_difference_and_unset_elsewhere():
    hosts = fleet()
    hosts[1] = host("node002", **{"env NCCL_IB_HCA": "mlx5_0"})
    hosts[2] = HostFacts("node003", {k: v for k, v in hosts[2].facts.items() if k != "env NCCL_SOCKET_IFNAME"},
                         hosts[2].gpus)
    assert lines(hosts) == ["config node003: env NCCL_SOCKET_IFNAME unset, 3 others eth0",
                            "config node002: env NCCL_IB_HCA mlx5_0, 3 others unset"]


def test_a_host_that_could_not_read_a_hardware_fact_is_not_called_different():
    hosts = fleet()
    hosts[0] = HostFacts("node001", {k: v for k, v in hosts[0].facts.items() if k != "driver"}, hosts[0].gpus)
    assert judge_config(hosts) == []


def test_no_majority_is_one_suspect_naming_the_split_and_excludes_nobody():
    hosts = fleet()
    hosts[2], hosts[3] = host("node003", nccl="2.21.5"), host("node004", nccl="2.21.5")
    suspects = judge_config(hosts)
    assert [s.line() for s in suspects] == [
        "config node[001-004]: nccl differs with no majority: 2.27.5 on node[001-002]; 2.21.5 on node[003-004]"]
    assert excluded_hosts(suspects) == []


def test_degraded_hardware_is_named_even_when_the_whole_fleet_shares_it_and_is_excluded():
    bad = replace(HEALTHY, ecc_uncorrectable=2, nvlinks_up=16, nvlinks_down=2, pcie_gen_current=4,
                  pcie_width_current=8, clock_reasons=("HW Slowdown", "SW Power Cap"))
    hosts = [host(f"node{i:03d}", gpus=(HEALTHY, replace(bad, index=1))) for i in (1, 2)]
    suspects = judge_config(hosts)
    assert [s.line() for s in suspects][:4] == [
        "config node001: GPU 1: 2 volatile uncorrectable ECC error(s)",
        "config node001: GPU 1: NVLink 2 of 18 links down",
        "config node001: GPU 1: PCIe Gen4 x8, its maximum Gen5 x16",
        "config node001: GPU 1: clocks slowed by HW Slowdown",
    ]
    assert len(suspects) == 8 and all(s.degraded for s in suspects)
    assert excluded_hosts(suspects) == ["node001", "node002"]
    assert fleet_wide_notes(hosts, suspects) == [
        "degraded hardware on 2 of 2 hosts, all on the exclude list: check one by hand before excluding most of "
        "the fleet (a platform may report a link or a counter so on every host)"]
    assert fleet_wide_notes(hosts + fleet(2), suspects) == []  # half the fleet: no note


def test_an_idle_gpus_lower_generation_is_power_saving_but_a_narrow_link_is_not():
    idle_slow = replace(HEALTHY, pcie_gen_current=1, idle=True)
    assert judge_config([host("a", gpus=(idle_slow,))]) == []
    narrow = replace(idle_slow, pcie_width_current=8)
    assert [s.line() for s in judge_config([host("a", gpus=(narrow,))])] == [
        "config a: GPU 0: PCIe Gen1 x8, its maximum Gen5 x16"]


def test_a_difference_alone_keeps_its_host_off_the_exclude_list():
    hosts = fleet()
    hosts[0] = host("node001", **{"env NCCL_SOCKET_IFNAME": "eth1"})
    suspects = judge_config(hosts)
    assert len(suspects) == 1 and not suspects[0].degraded and excluded_hosts(suspects) == []


def test_the_summary_says_what_was_compared_and_from_where():
    assert summary_line(fleet(2), []) == ("# config: 3 fact(s) compared on 2 host(s), 2 GPU(s) checked "
                                          "(from nvidia-smi -q, test): the fleet agrees")


def test_environment_facts_keep_nccl_cuda_torch_variables_and_hide_secrets():
    environ = {"NCCL_SOCKET_IFNAME": "eth0", "CUDA_VISIBLE_DEVICES": "0,1", "TORCH_NCCL_BLOCKING_WAIT": "1",
               "NCCL_BENCH_HISTORY": "postgresql://u:pw@db/x", "HOME": "/root", "NCCL_IB_TOKEN": "abc",
               "NCCL_DEBUG_FILE": "postgresql://me:Tops3cret@db/x"}
    facts = environment_facts(environ)
    assert {k: f.value for k, f in facts.items()} == {
        "env CUDA_VISIBLE_DEVICES": "0,1", "env NCCL_DEBUG_FILE": "postgresql://me:***@db/x",
        "env NCCL_IB_TOKEN": "***", "env NCCL_SOCKET_IFNAME": "eth0", "env TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert {f.source for f in facts.values()} == {"environment"}


def test_hardware_facts_summarise_the_gpus_and_list_rdma_ports():
    hardware = HostHardware("answered", ("580.159.04", "nvidia-smi -q"), ("13.0", "nvidia-smi -q"),
                            (HEALTHY, replace(HEALTHY, index=1)),
                            (RdmaPort("mlx5_0/1", "ACTIVE", "400 Gb/sec (4X NDR)"),), ())
    facts = hardware_facts(hardware)
    assert {k: f.value for k, f in facts.items()} == {
        "nvidia-smi": "answered", "driver": "580.159.04", "cuda driver": "13.0", "gpu count": "2",
        "gpu model": "NVIDIA H100 80GB HBM3",
        "gpu memory": "81559 MiB", "ecc mode": "Enabled", "clock event reasons": "none",
        "rdma mlx5_0/1": "ACTIVE 400 Gb/sec (4X NDR)"}
    assert facts["rdma mlx5_0/1"].source == "/sys/class/infiniband"
    assert facts["gpu count"].source == "nvidia-smi -q"


def test_doctor_json_holds_the_facts_and_config_suspects_and_reads_back_as_the_same_lines():
    import json

    from nccl_bench.doctor.doctor_report import DoctorReport, report_json
    from nccl_bench.render.doctor_text import recorded_suspect_line
    from tests.helpers.doctor_reports import three_node_header, three_node_judgement

    hosts = fleet(2) + [host("node003", driver="570.86.15", gpus=(replace(HEALTHY, ecc_uncorrectable=1),))]
    judgement = three_node_judgement()
    suspects = judge_config(hosts)
    judgement.suspects[:0] = suspects
    report = DoctorReport(None, three_node_header(), judgement, wall_s=1.0, config_hosts=hosts)
    data = json.loads(json.dumps(report_json(report)))
    assert data["schema_version"] == 3
    assert [h["host"] for h in data["config"]["hosts"]] == ["node001", "node002", "node003"]
    assert data["config"]["hosts"][2]["facts"]["driver"] == {"value": "570.86.15", "source": "test"}
    assert data["config"]["hosts"][2]["gpus"][0]["ecc_uncorrectable"] == 1
    assert [recorded_suspect_line(s) for s in data["suspects"][:2]] == [s.line() for s in suspects] == [
        "config node003: driver 570.86.15, 2 others 580.159.04",
        "config node003: GPU 0: 1 volatile uncorrectable ECC error(s)"]
    assert [s["degraded"] for s in data["suspects"][:2]] == [False, True]
    assert "node003" in data["exclude"]


def golden(path, text: str):
    from nccl_bench.doctor.doctor_config import _golden

    path.write_text(text)
    return _golden(str(path), "--expect-config")


def test_a_golden_config_judges_its_facts_and_the_fleet_judges_the_rest(tmp_path):
    from nccl_bench.doctor.config_check import unreported

    expected = golden(tmp_path / "gold.toml",
                      'driver = "580.159.04"\n"gpu count" = 8\n[env]\nNCCL_SOCKET_IFNAME = "eth0"\n')
    assert expected.facts == (("driver", "580.159.04"), ("gpu count", "8"), ("env NCCL_SOCKET_IFNAME", "eth0"))
    hosts = fleet(3) + [host("node004", nccl="2.21.5")]
    hosts[1] = host("node002", driver="570.86.15")
    # nccl is not in the golden file: the fleet's majority judges it; no host reports a gpu count (these
    # hosts have no such fact): a note, never a suspect.
    assert lines(hosts, expected) == [
        f"config node002: driver 570.86.15, expected 580.159.04 ({tmp_path / 'gold.toml'})",
        "config node004: nccl 2.21.5, 3 others 2.27.5"]
    assert unreported(hosts, expected) == [
        f"--expect-config {tmp_path / 'gold.toml'}: no host reports a fact named 'gpu count'"]
    assert judge_config(fleet(4), expected) == []


def test_a_whole_fleet_off_the_golden_config_is_named_host_by_host(tmp_path):
    expected = golden(tmp_path / "gold.json", '{"driver": "580.159.04", "env NCCL_IB_HCA": "mlx5"}')
    hosts = [host(f"node{i:03d}", driver="580.65.06") for i in (1, 2)]
    hosts[1] = HostFacts("node002", {k: v for k, v in hosts[1].facts.items() if k != "driver"}, hosts[1].gpus)
    assert lines(hosts, expected) == [
        f"config node001: driver 580.65.06, expected 580.159.04 ({tmp_path / 'gold.json'})",
        f"config node002: driver not read, expected 580.159.04 ({tmp_path / 'gold.json'})",
        f"config node001: env NCCL_IB_HCA unset, expected mlx5 ({tmp_path / 'gold.json'})",
        f"config node002: env NCCL_IB_HCA unset, expected mlx5 ({tmp_path / 'gold.json'})"]


def test_the_fleets_majority_values_read_back_as_a_golden_config(tmp_path):
    import json

    from nccl_bench.doctor.config_check import fleet_values

    healthy = fleet(3) + [host("node004", nccl="2.21.5")]
    values = fleet_values(healthy)
    assert values == {"driver": "580.159.04", "nccl": "2.27.5", "env NCCL_SOCKET_IFNAME": "eth0"}
    split = fleet(2) + [host("node003", nccl="2.21.5"), host("node004", nccl="2.21.5")]
    assert "nccl" not in fleet_values(split)  # no majority, no golden value
    expected = golden(tmp_path / "fleet.json", json.dumps(values))
    later = fleet(4)
    later[2] = host("node003", **{"env NCCL_SOCKET_IFNAME": "ib0"})
    assert lines(later, expected) == [
        f"config node003: env NCCL_SOCKET_IFNAME ib0, expected eth0 ({tmp_path / 'fleet.json'})"]


def test_a_host_reads_its_rdma_ports_from_the_hooks_tree_and_keeps_nccls_report(tmp_path, monkeypatch):
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("1: DOWN\n")
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    monkeypatch.setattr(config_facts, "version_facts", lambda on_gpu, without_torch: {})  # no torch import
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: the GPU facts say so and the ports remain
    report = ["NCCL DIAG === NCCL Diagnostics ===",
              "NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification"]
    facts = config_facts.host_facts("node001", {config_facts.SYSFS_ROOT_ENV: str(tmp_path)}, False, report)
    assert facts.facts["rdma mlx5_0/1"] == Fact("DOWN 400 Gb/sec (4X NDR)", "/sys/class/infiniband")
    assert not any(config_facts.SYSFS_ROOT_ENV in name for name in facts.facts)  # the hook is never compared
    assert [(f.status, f.check) for f in facts.nccl_diag] == [("INFO", "p2p")]


def test_the_version_facts_are_the_same_values_from_torch_or_from_its_files():
    import torch

    from nccl_bench.hardware import stack

    assert config_facts.version_facts(on_gpu=False) == {"torch": Fact(torch.__version__, "torch")}
    assert config_facts.version_facts(on_gpu=False, without_torch=True) == {
        "torch": Fact(torch.__version__, stack.SOURCE_VERSION_PY)}


def test_without_torch_a_gpu_host_names_each_version_s_own_source(monkeypatch):
    from nccl_bench.hardware import stack

    monkeypatch.setattr(stack, "torch_cuda_build", lambda: "12.8")
    monkeypatch.setattr(stack, "nccl_version", lambda: ("2.27.3", stack.SOURCE_NCCL_CALL))
    facts = config_facts.version_facts(on_gpu=True, without_torch=True)
    assert (facts["cuda runtime"], facts["nccl"]) == (Fact("12.8", "torch/version.py"),
                                                     Fact("2.27.3", "ncclGetVersion of the libnccl.so torch preloads"))
