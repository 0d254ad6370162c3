"""--prom text: Prometheus' own parser reads it back; names carry base units; values are the rows' and
doctor.json's numbers in bytes/s and seconds; label values from hosts are escaped; the file is replaced whole."""

from __future__ import annotations

import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nccl_bench.render import prom
from nccl_bench.render.prom import doctor_metrics, sweep_metrics
from nccl_bench.results import whole_file
from tests.helpers.rows import MiB, row

META = {"status": "complete", "backend": "gloo", "world_size": 2, "nodes": 1,
        "versions": {"torch": "2.13.0+cpu", "python": "3.11.7"}}
NOW_S = 1_795_000_000.5


def families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_sweep_rows_become_gauges_in_base_units_with_the_rows_labels():
    rows = [row(size_bytes=MiB, time_us=100.0), row(size_bytes=4 * MiB, time_us=250.0, wrong=None)]
    found = families(sweep_metrics(rows, META, NOW_S))
    assert set(found) == {"nccl_bench_busbw_bytes_per_second", "nccl_bench_algbw_bytes_per_second",
                          "nccl_bench_time_seconds", "nccl_bench_wrong_elements", "nccl_bench_run_info",
                          "nccl_bench_run_complete", "nccl_bench_run_timestamp_seconds", "nccl_bus_bandwidth_gbs",
                          "nccl_collective_exec_time_microseconds"}
    assert all(family.type == "gauge" and family.documentation for family in found.values())
    busbw = found["nccl_bench_busbw_bytes_per_second"].samples
    assert [s.value for s in busbw] == [rows[0].busbw_gbps * 1e9, rows[1].busbw_gbps * 1e9]
    assert busbw[0].labels == {"op": "all_reduce", "placement": "in_place", "size_bytes": str(MiB), "dtype": "float",
                               "world_size": "2", "nodes": "1", "backend": "gloo"}
    assert [s.value for s in found["nccl_bench_time_seconds"].samples] == [100.0 * 1e-6, 250.0 * 1e-6]
    assert [s.value for s in found["nccl_bench_wrong_elements"].samples] == [0]  # the unchecked row has none
    (info,) = found["nccl_bench_run_info"].samples
    assert info.value == 1 and info.labels == {
        "command": "sweep", "status": "complete", "backend": "gloo", "world_size": "2", "nodes": "1",
        "nccl_bench_version": "0.1.0", "torch_version": "2.13.0+cpu", "python_version": "3.11.7"}
    (stamp,) = found["nccl_bench_run_timestamp_seconds"].samples
    assert stamp.value == NOW_S and stamp.labels == {"command": "sweep"}
    assert [s.value for s in found["nccl_bench_run_complete"].samples] == [1]


@pytest.mark.parametrize("status", ["started", "failed", "interrupted", "refused"])
def test_a_run_that_did_not_complete_says_so_in_its_own_gauge(status):
    found = families(prom.run_metrics("sweep", {"status": status}, NOW_S))
    assert set(found) == {"nccl_bench_run_info", "nccl_bench_run_complete", "nccl_bench_run_timestamp_seconds"}
    assert [s.value for s in found["nccl_bench_run_complete"].samples] == [0]
    assert found["nccl_bench_run_info"].samples[0].labels["status"] == status


@pytest.mark.parametrize("size,bucket", [(0, "0B"), (8, "8-9B"), (1023, "1023-1024B"), (1024, "1-2KB"),
                                         (MiB, "1-2MB"), (3 * MiB // 2, "1-2MB"), (134 * MiB + 5, "134-135MB"),
                                         (1 << 30, "1-2GB")])
def test_message_sizes_fall_in_the_inspectors_buckets(size, bucket):
    assert prom.inspector_message_size(size) == bucket


def test_rows_carry_nccl_inspectors_names_and_labels_one_sample_per_label_set():
    """Parsed by prometheus_client: the Inspector's two families with its labels; rows of one bucket (1M and
    1.5M, both placements) are one sample: the geometric mean of their busbw, the mean of their times."""
    rows = [row(size_bytes=MiB, busbw=2.0), row(size_bytes=3 * MiB // 2, busbw=8.0, placement="out_of_place"),
            row(op="all_gather", size_bytes=64 * MiB, busbw=5.0, algo="RING", proto="SIMPLE", world_size=8, nodes=2),
            row(op="barrier", size_bytes=0, time_us=5.0, busbw=None)]
    meta = {**META, "hostnames": ["node001", "node001"]}
    found = families(sweep_metrics(rows, meta, NOW_S, slurm_job_id="4242"))
    busbw = found["nccl_bus_bandwidth_gbs"].samples
    assert len(busbw) == 2 and found["nccl_bus_bandwidth_gbs"].type == "gauge"
    assert busbw[0].labels == {"version": "nccl_bench 0.1.0", "slurm_job_id": "4242", "node": "node001", "gpu": "all",
                               "comm_name": "nccl_bench", "n_nodes": "1", "nranks": "2", "collective": "AllReduce",
                               "message_size": "1-2MB", "algo_proto": "unknown"}
    assert busbw[0].value == pytest.approx(4.0)  # sqrt(2 x 8)
    assert (busbw[1].labels["collective"], busbw[1].labels["algo_proto"], busbw[1].labels["nranks"],
            busbw[1].labels["n_nodes"], busbw[1].value) == ("AllGather", "RING_SIMPLE", "8", "2", 5.0)
    times = found["nccl_collective_exec_time_microseconds"].samples
    assert times[0].value == pytest.approx((rows[0].time_us + rows[1].time_us) / 2)
    assert {s.labels["collective"] for s in times} == {"AllReduce", "AllGather"}  # a barrier is no NCCL collective


def test_a_row_without_a_bandwidth_has_no_bandwidth_sample():
    barrier = row(op="barrier", size_bytes=0, time_us=5.0, busbw_gbps=None, algbw_gbps=None, busbw_factor=None)
    found = families(sweep_metrics([barrier], META, NOW_S))
    assert "nccl_bench_busbw_bytes_per_second" not in found
    assert [s.value for s in found["nccl_bench_time_seconds"].samples] == [5.0 * 1e-6]


VERDICTS = {
    "nodes": [{"host": "nodea", "intra_busbw_gbps": 180.5}, {"host": 'no"de\\b', "intra_busbw_gbps": None},
              {"host": "nodec", "intra_busbw_gbps": 12.25}],
    "pairs": [{"hosts": ["nodea", "nodec"], "rail": 0, "busbw_gbps": 40.0},
              {"hosts": ["nodea", "nodec"], "rail": 1, "busbw_gbps": 3.5}],
    "suspects": [{"kind": "rail", "hosts": ["nodec"], "rail": 1}, {"kind": "link", "hosts": ["nodea", "nodec"]}],
}


def test_doctor_exports_hosts_pairs_and_a_suspect_gauge_per_host_and_kind():
    found = families(doctor_metrics(VERDICTS, {**META, "nodes": 3}, NOW_S))
    intra = found["nccl_bench_doctor_node_busbw_bytes_per_second"].samples
    assert [(s.labels, s.value) for s in intra] == [({"host": "nodea"}, 180.5e9), ({"host": "nodec"}, 12.25e9)]
    pairs = found["nccl_bench_doctor_pair_busbw_bytes_per_second"].samples
    assert [(s.labels, s.value) for s in pairs] == [({"pair": "nodea,nodec", "rail": "0"}, 40.0e9),
                                                    ({"pair": "nodea,nodec", "rail": "1"}, 3.5e9)]
    suspect = {(s.labels["host"], s.labels["kind"]): s.value for s in found["nccl_bench_doctor_suspect"].samples}
    assert len(suspect) == 15 and {key for key, value in suspect.items() if value == 1} == {
        ("nodea", "link"), ("nodec", "link"), ("nodec", "rail")}
    assert ('no"de\\b', "node") in suspect  # a host name's quote and backslash survive the round trip
    assert found["nccl_bench_run_info"].samples[0].labels["command"] == "doctor"


def test_a_missing_host_has_a_suspect_gauge_though_it_has_no_node_entry():
    missing = {"kind": "missing", "hosts": ["noded"], "rail": None}
    found = families(doctor_metrics({**VERDICTS, "suspects": [missing]}, META, NOW_S))
    suspect = {(s.labels["host"], s.labels["kind"]): s.value for s in found["nccl_bench_doctor_suspect"].samples}
    assert suspect[("noded", "missing")] == 1 and suspect[("noded", "node")] == 0
    assert [key for key, value in suspect.items() if value == 1] == [("noded", "missing")]


def test_escaping_keeps_a_hostile_host_name_on_its_own_line():
    text = doctor_metrics({**VERDICTS, "nodes": [{"host": 'x"}\nnccl_bench_fake 1', "intra_busbw_gbps": 1.0}]},
                          META, NOW_S)
    assert "nccl_bench_fake" not in families(text)
    (sample,) = families(text)["nccl_bench_doctor_node_busbw_bytes_per_second"].samples
    assert sample.labels == {"host": 'x"}\nnccl_bench_fake 1'}


def test_the_file_is_replaced_by_a_rename_and_no_temporary_file_is_left(tmp_path, monkeypatch):
    path = tmp_path / "nccl_bench.prom"
    path.write_text("old\n")
    renames = []
    real_replace = os.replace
    monkeypatch.setattr(whole_file.os, "replace", lambda src, dst: (renames.append((src, dst)), real_replace(src, dst)))
    whole_file.replace_whole(path, "new\n")
    assert path.read_text() == "new\n" and list(tmp_path.iterdir()) == [path]
    ((source, target),) = renames
    assert target == path and source.parent == path.parent and not source.name.endswith(".prom")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "nccl_bench.prom"
    path.write_text("old\n")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(whole_file.os, "replace", refuse)
    with pytest.raises(OSError):
        whole_file.replace_whole(path, "new\n")
    assert path.read_text() == "old\n" and list(tmp_path.iterdir()) == [path]
