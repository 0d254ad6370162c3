"""deploy/k8s/: each manifest parses, its commands are accepted by the CLI as written, and the
variables its operator injects give the right rank layout when the command runs on simulated hosts.

There is no Kubernetes here. What each operator injects is taken from its own source and docs:
the training operator's PyTorchJob (pytorch/envvar.go: MASTER_ADDR = <job>-master-0, MASTER_PORT =
the port named pytorchjob-port, WORLD_SIZE = pods, RANK = the pod's index, PYTHONUNBUFFERED);
JobSet's Indexed Job (Kubernetes' JOB_COMPLETION_INDEX, pods named <jobset>-<job>-<index>-<pod> on
the subdomain <jobset>); the mpi-operator's launcher (mpi_job_controller.go: OMPI_MCA_orte_default_hostfile,
OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_orte_set_default_slots; plm_rsh_args is ssh's and is
left out because the simulated hosts' rsh agent stands in for ssh). Each pod is a simulated host
named as the pod; the launcher part of the command runs verbatim, with GPUS_PER_NODE (or
slotsPerWorker) at 2, the knob the manifests' comments name, and a small sweep after `nccl_bench`.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from nccl_bench.cli.entry import app
from nccl_bench.doctor.doctor_config import DoctorConfig
from nccl_bench.option_types import declared
from nccl_bench.sweep.sweep_config import SweepConfig
from tests.helpers.launch import REPO, worker_env
from tests.helpers.simhosts import layout_tag

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install -e '.[test]' installs it)")

K8S = REPO / "deploy" / "k8s"
KINDS = {"pytorchjob.yaml": "PyTorchJob", "jobset.yaml": "JobSet", "mpijob.yaml": "MPIJob"}
SMALL = ["sweep", "--no-plot", "--op", "all_reduce", "--sizes", "1K,4K", "--iters", "2", "-w", "0"]
GPUS = "1"  # one rank per pod: the layout across pods is what the operators set; fewer torch imports


def _documents(name: str) -> list[dict]:
    return list(yaml.safe_load_all((K8S / name).read_text()))


def _commanded(pod_spec: dict) -> list[dict]:
    return [c for c in pod_spec["containers"] if c.get("args")]


def _pods(doc: dict) -> dict[str, dict]:
    """Pod specs by role: PyTorchJob/MPIJob replica types, or JobSet's replicated jobs."""
    if doc["kind"] == "JobSet":
        return {job["name"]: job["template"]["spec"]["template"]["spec"] for job in doc["spec"]["replicatedJobs"]}
    specs = doc["spec"]["pytorchReplicaSpecs" if doc["kind"] == "PyTorchJob" else "mpiReplicaSpecs"]
    return {role: spec["template"]["spec"] for role, spec in specs.items()}


def _script(doc: dict) -> tuple[str, dict]:
    """The one bash -c script the job runs (every commanded container runs the same), and its container."""
    containers = [c for spec in _pods(doc).values() for c in _commanded(spec)]
    assert {c["args"][0] for c in containers} and len({c["args"][0] for c in containers}) == 1
    assert containers[0]["command"] == ["bash", "-c"]
    return containers[0]["args"][0], containers[0]


def _tool_argv(script: str) -> list[str]:
    words = shlex.split(script)
    at = words.index("nccl_bench")
    assert words[at - 1] == "-m"
    return words[at + 1:]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_manifest_parses_into_a_sweep_and_a_doctor(name):
    docs = _documents(name)
    assert [d["kind"] for d in docs] == [KINDS[name]] * 2
    assert [_tool_argv(_script(d)[0])[0] for d in docs] == ["sweep", "doctor"]
    assert [d["metadata"]["name"] for d in docs] == ["nccl-bench-sweep", "nccl-bench-doctor"]
    for doc in docs:  # GPUs asked for wherever ranks run (the MPI launcher runs none)
        workers = {role: spec for role, spec in _pods(doc).items() if role != "Launcher"}
        assert all(c["resources"]["limits"]["nvidia.com/gpu"] == 8 for s in workers.values() for c in s["containers"])


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_commands_are_accepted_by_the_cli_as_written(name):
    group = typer.main.get_command(app)
    for doc in _documents(name):
        command, *args = _tool_argv(_script(doc)[0])
        parent = group.make_context("nccl-bench", [command, *args])
        params = group.get_command(parent, command).make_context(command, list(args), parent=parent).params
        options = [carried.item for carried in declared(SweepConfig if command == "sweep" else DoctorConfig).values()]
        given = [o for o in options if params.get(o.key) not in (None, o.default)]
        assert given, params  # the manifests pass options, and each one reads under its own parser
        for option in given:
            option.read(params[option.key])


def _hosts(names: tuple[str, ...]):
    from tests.helpers.simhosts import SetupError, simulated_hosts, why_no_namespaces

    reason = why_no_namespaces()
    if reason:
        pytest.skip(reason)
    try:
        return simulated_hosts(len(names), layout_tag(), hostnames=names)
    except SetupError as exc:
        pytest.skip(f"cannot build simulated hosts here: {exc}")


def _run_pods(hosts, tmp_path, script: str, env_per_pod: list[dict]) -> list[subprocess.CompletedProcess]:
    path = dict(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    procs = [subprocess.Popen(hosts.command(i, tmp_path / "hosts", ["bash", "-c", script]), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=worker_env({**path, **env}),
                              cwd=tmp_path) for i, env in enumerate(env_per_pod)]
    try:
        return [(p.communicate(timeout=120)[0], p.returncode) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def _small(script: str, out: Path) -> str:
    return script[:script.index("-m nccl_bench")] + "-m nccl_bench " + shlex.join([*SMALL, "--out", str(out)])


def _layout(out: Path) -> tuple:
    meta = json.loads((out / "meta.json").read_text())
    return meta["launcher"], meta["world_size"], meta["nodes"], meta["hostnames"], meta["status"]


def _container_env(container: dict) -> dict[str, str]:
    env = {e["name"]: str(e["value"]) for e in container.get("env", [])}
    return {**env, "GPUS_PER_NODE": GPUS} if "GPUS_PER_NODE" in env else env


@pytest.mark.integration
def test_pytorchjob_variables_give_torchrun_the_layout(tmp_path):
    doc = _documents("pytorchjob.yaml")[0]
    script, container = _script(doc)
    job = doc["metadata"]["name"]
    replicas = doc["spec"]["pytorchReplicaSpecs"]
    pods = (f"{job}-master-0", *(f"{job}-worker-{i}" for i in range(replicas["Worker"]["replicas"])))
    [port] = [p["containerPort"] for p in container["ports"] if p["name"] == "pytorchjob-port"]
    injected = [{"MASTER_ADDR": pods[0], "MASTER_PORT": str(port), "WORLD_SIZE": str(len(pods)), "RANK": str(i),
                 "PYTHONUNBUFFERED": "0"} for i in range(len(pods))]
    with _hosts(pods) as hosts:
        hosts.hosts_file(tmp_path)
        done = _run_pods(hosts, tmp_path, _small(script, tmp_path / "run"),
                         [{**_container_env(container), **env} for env in injected])
    assert [code for _, code in done] == [0, 0], done[0][0][-3000:]
    assert _layout(tmp_path / "run") == ("torchrun", 2, 2, [pods[0], pods[1]], "complete")


@pytest.mark.integration
def test_jobset_completion_index_gives_torchrun_the_layout(tmp_path):
    doc = _documents("jobset.yaml")[0]
    script, container = _script(doc)
    [job] = doc["spec"]["replicatedJobs"]
    count = job["template"]["spec"]["parallelism"]
    jobset = doc["metadata"]["name"]
    pods = tuple(f"{jobset}-{job['name']}-0-{i}" for i in range(count))
    with _hosts(pods) as hosts:
        hosts_file = hosts.hosts_file(tmp_path)  # each pod also answers as <pod>.<jobset>, JobSet's subdomain
        hosts_file.write_text("".join(f"{line} {line.split()[1]}.{jobset}\n" if line.split()[1] in pods else line + "\n"
                                      for line in hosts_file.read_text().splitlines()))
        done = _run_pods(hosts, tmp_path, _small(script, tmp_path / "run"),
                         [{**_container_env(container), "JOB_COMPLETION_INDEX": str(i)} for i in range(count)])
    assert [code for _, code in done] == [0] * count, done[0][0][-3000:]
    assert _layout(tmp_path / "run") == ("torchrun", 2, 2, [pods[0], pods[1]], "complete")


@pytest.mark.integration
def test_mpijob_launcher_variables_give_mpirun_the_layout(mpi, tmp_path):
    doc = _documents("mpijob.yaml")[0]
    script, _ = _script(doc)
    workers = doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    hostfile = tmp_path / "hostfile"  # as the operator writes /etc/mpi/hostfile, with slotsPerWorker at GPUS
    hostfile.write_text("".join(f"{mpi.hostnames[i]} slots={GPUS}\n" for i in range(workers)))
    options = mpi.options()  # the simulated hosts' agent and TCP settings, as MCA variables
    assert options[0] == "--allow-run-as-root"
    mca = {f"OMPI_MCA_{options[i + 1]}": options[i + 2] for i in range(1, len(options), 3)}
    injected = {"OMPI_MCA_orte_default_hostfile": str(hostfile), "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                "OMPI_MCA_orte_set_default_slots": GPUS, "K_MPI_JOB_ROLE": "launcher"}
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    launcher = len(mpi.hostnames) - 1  # a pod of its own: no rank runs there
    done = subprocess.run(mpi.hosts.command(launcher, mpi.hosts_file, ["bash", "-c", _small(script, tmp_path / "run")]),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=mpi.env({**worker_env(), **mca, **injected, "PATH": path}))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _layout(tmp_path / "run") == ("mpirun", 2, 2, [mpi.hostnames[0], mpi.hostnames[1]], "complete")
