"""`nccl-bench doctor` from the command line: bad input (one line, exit 2) and a real run on local ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.forked_cli import run_forked
from tests.helpers.launch import REPO, worker_env

ERROR = "nccl-bench: error: "


def _run(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The command in a process of its own, forked from one that has imported torch (tests/helpers/forked_cli.py)."""
    return run_forked(list(args), cwd=cwd, env=worker_env({"COLUMNS": "200"}), timeout=timeout)


BAD = [
    (["--phase", "bogus"], "--phase: unknown phase 'bogus'; choose from nodes, pairs or all"),
    (["--size", "1Q"], "--size: expected a byte size like 8, 1K, 64M or 1G, got '1Q'"),
    (["--size", "2"], "--size: must be at least 4 bytes (one float32), got 2"),
    (["--tolerance", "150%"], "--tolerance: must be below 100%, got '150%'"),
    (["--expect", "0"], "--expect: must be greater than 0, got 0.0"),
    (["--iters", "0"], "--iters: must be at least 1, got 0"),
    (["--quick-rounds", "0"], "--quick-rounds: must be at least 1, got 0"),
    (["--workers", "0"], "--workers: must be at least 1, got 0"),
    (["--backend", "tcp"], "--backend: 'tcp' is not one of auto, nccl, gloo, mpi, ucc"),
    (["--json", "{tmp}/nowhere/v.json"], "--json: folder {tmp}/nowhere does not exist"),
    (["--exclude-file", "{tmp}/nowhere/x.txt"], "--exclude-file: folder {tmp}/nowhere does not exist"),
    (["--expect-hosts", "node[01-"], "--expect-hosts: '[' without ']' in hostlist 'node[01-'"),
    (["--expect-hosts", "node[4-2]"], "--expect-hosts: range 4-2 runs backwards in hostlist 'node[4-2]'"),
    (["--prom", "{tmp}/nowhere/d.prom"], "--prom: folder {tmp}/nowhere does not exist"),
    (["--expect-config", "{tmp}/nowhere/g.json"], "--expect-config: no such file: {tmp}/nowhere/g.json"),
    (["--expect-config", "{tmp}/full"], "--expect-config: cannot read {tmp}/full: Is a directory"),
    (["--expect-config", "{tmp}/full/doctor.csv"],
     "--expect-config: {tmp}/full/doctor.csv is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    (["--prom", "{tmp}"], "--prom: {tmp} is a directory; give a file name"),
    (["--out", "{tmp}/full"], "--out: {tmp}/full already exists and is not empty; a run never overwrites results"),
    (["--workers", "1"], "--workers: 1 rank(s) on 1 host(s) leave the doctor nothing to measure: the nodes phase "
                         "needs a host with 2 or more ranks and the pairs phase needs 2 or more hosts"),
    (["--workers", "1", "--phase", "nodes"], "--phase: 1 rank(s) on 1 host(s) leave the doctor nothing to measure: "
                                             "the nodes phase needs a host with 2 or more ranks"),
    (["--workers", "2", "--phase", "pairs"], "--phase: 2 rank(s) on 1 host(s) leave the doctor nothing to measure: "
                                             "the pairs phase needs 2 or more hosts"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[a[0] for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(tmp_path, args, message):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "doctor.csv").write_text("precious\n")
    result = _run(tmp_path, "doctor", *[a.format(tmp=tmp_path) for a in args])
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [ERROR + message.format(tmp=tmp_path)]
    assert (tmp_path / "full" / "doctor.csv").read_text() == "precious\n"


@pytest.mark.integration
def test_one_host_two_workers_measures_the_node_and_skips_pairs(tmp_path):
    out, verdict_file, prom = tmp_path / "run", tmp_path / "v.json", tmp_path / "doctor.prom"
    exclude = tmp_path / "exclude.txt"
    result = _run(REPO, "doctor", "--workers", "2", "--size", "1M", "--out", str(out), "--json", str(verdict_file),
                  "--prom", str(prom), "--exclude-file", str(exclude))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    verdict = json.loads(verdict_file.read_text())
    metrics = {f.name: f.samples for f in text_string_to_metric_families(prom.read_text())}
    (intra,) = metrics["nccl_bench_doctor_node_busbw_bytes_per_second"]
    assert intra.labels == {"host": verdict["nodes"][0]["host"]}
    assert intra.value == verdict["nodes"][0]["intra_busbw_gbps"] * 1e9
    assert "nccl_bench_doctor_pair_busbw_bytes_per_second" not in metrics  # one host: no pair
    assert [(s.labels["kind"], s.value) for s in metrics["nccl_bench_doctor_suspect"]] == [
        ("node", 0), ("link", 0), ("rail", 0), ("missing", 0), ("config", 0)]
    assert metrics["nccl_bench_run_info"][0].labels["command"] == "doctor"
    assert verdict == json.loads((out / "doctor.json").read_text())
    assert set(verdict) >= {"schema_version", "verdict", "nodes", "pairs", "suspects", "wall_s"}
    assert verdict["schema_version"] == 3 and verdict["verdict"] == "healthy"
    assert [h["host"] for h in verdict["config"]["hosts"]] == [node["host"] for node in verdict["nodes"]]
    assert verdict["expected_hosts"] is None and verdict["exclude"] == [] and exclude.read_text() == ""
    (node,) = verdict["nodes"]
    assert node["ranks"] == [0, 1] and node["intra_busbw_gbps"] > 0 and node["pair_median_gbps"] is None
    assert verdict["pairs"] == [] and verdict["suspects"] == [] and verdict["size_bytes"] == 1024**2
    assert "pairs phase skipped: one node, no pair of nodes to test" in verdict["notes"]
    lines = (out / "doctor.csv").read_text().splitlines()
    assert (
        lines[0].startswith("phase,attempt,round,hosts,rail,ranks,size_bytes,iters,samples,time_us")
        and "best_busbw_gbps" in lines[0]
    )
    assert lines[1].startswith("nodes,1,0,") and len(lines) == 2
    meta = json.loads((out / "meta.json").read_text())
    assert meta["command"] == "doctor" and meta["status"] == "complete" and meta["world_size"] == 2
    assert "# note: pairs phase skipped" in result.stdout and "# verdict: healthy" in result.stdout
    assert "# config: " in result.stdout and ": the fleet agrees" in result.stdout
    assert f"# exclude: none; written to {exclude}" in result.stdout


@pytest.mark.integration
def test_config_only_on_one_worker_compares_and_measures_nothing(tmp_path):
    """One rank on one host is nothing to measure, but a configuration to read: --config-only runs."""
    out, verdict_file = tmp_path / "run", tmp_path / "v.json"
    result = _run(REPO, "doctor", "--workers", "1", "--config-only", "--out", str(out), "--json", str(verdict_file))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    verdict = json.loads(verdict_file.read_text())
    assert verdict["verdict"] == "healthy" and verdict["pairs"] == [] and verdict["notes"] == []
    (facts,) = verdict["config"]["hosts"]
    assert facts["facts"]["torch"]["source"] == "torch" and "gpu count" in facts["facts"]
    assert (out / "doctor.csv").read_text() == ""  # no measurement (the CSV writes its header with a first row)
    assert "# phases: config only (--config-only)" in result.stdout and "# measurement" not in result.stdout
    assert "# config: " in result.stdout and "# estimate" not in result.stdout


@pytest.mark.integration
def test_config_only_against_a_golden_config_names_the_host_that_differs(tmp_path):
    golden = tmp_path / "golden.toml"
    golden.write_text('[env]\nNCCL_SOCKET_IFNAME = "eth9"\n')
    out, verdict_file = tmp_path / "run", tmp_path / "v.json"
    result = _run(REPO, "doctor", "--workers", "1", "--config-only", "--expect-config", str(golden), "--out", str(out),
                  "--json", str(verdict_file))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    verdict = json.loads(verdict_file.read_text())
    (suspect,) = verdict["suspects"]
    assert (suspect["kind"], suspect["degraded"]) == ("config", False) and verdict["exclude"] == []
    assert suspect["reason"] == f"env NCCL_SOCKET_IFNAME unset, expected eth9 ({golden})"
    assert f"config {suspect['hosts'][0]}: env NCCL_SOCKET_IFNAME unset, expected eth9" in result.stdout
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["expect_config"] == [str(golden), [["env NCCL_SOCKET_IFNAME", "eth9"]]]


@pytest.mark.integration
def test_a_launcher_layout_that_measures_nothing_is_refused_on_every_rank(torchrun, tmp_path):
    out = tmp_path / "run"
    result = torchrun(1, ["doctor", "--phase", "nodes", "--out", str(out)])
    # torchrun itself adds a summary (with its own traceback) of the worker that exited 2.
    assert "exitcode  : 2" in result.stderr, result.stderr[-3000:]
    assert "nccl_bench/" not in result.stderr.split("ChildFailedError")[0], result.stderr[-3000:]
    assert [line for line in result.stderr.splitlines() if line.startswith(ERROR)] == [
        ERROR + "--phase: 1 rank(s) on 1 host(s) leave the doctor nothing to measure: "
        "the nodes phase needs a host with 2 or more ranks"
    ]
    assert "# verdict" not in result.stdout and not out.exists()


def test_the_doctor_hands_on_stuck_to_its_run_as_the_sweep_does(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from nccl_bench.cli import main, messages, on_ranks
    from nccl_bench.doctor import doctor_body

    seen = {}

    def execute(config, observer_factory, on_stuck=None):
        seen.update(config=config, on_stuck=on_stuck)
        return SimpleNamespace(judgement=None)

    monkeypatch.setattr(on_ranks, "detect_launch", lambda: SimpleNamespace(rank=0, launcher="torchrun", world_size=2))
    monkeypatch.setattr(doctor_body, "execute", execute)
    monkeypatch.setattr(sys, "argv", ["nccl-bench", "doctor", "--backend", "gloo", "--out", str(tmp_path / "run")])
    main()
    assert seen["on_stuck"] is messages.end_stuck_rank and seen["config"].backend == "gloo"
