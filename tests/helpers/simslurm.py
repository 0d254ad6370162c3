"""A real Slurm cluster on simulated hosts (simhosts.py): munged, slurmctld, one slurmd per host.

Everything runs inside the namespaces simhosts makes: munged and slurmctld in the controller host's
namespace (host 0 by default, which also runs a slurmd), and each slurmd in its own host's
namespace with that host's hostname and /etc/hosts (`NodeName=node01 NodeAddr=10.78.x.1`). State,
spool, pid and log files live under one folder; the cluster's slurm.conf is handed to every
daemon with -f and to every client through SLURM_CONF. Plugins are the ones that need no cgroups
(proctrack/linuxproc, task/none, no accounting), SlurmUser=root, ReturnToService=2.

munged listens on a Unix socket in the folder (the file system is shared by all namespaces), so
one key serves every host. Every daemon runs in the foreground (-D / -F) in its own session; on
exit every daemon and then every process left in the namespaces (slurmstepd, tasks) is killed
before the namespaces are deleted. slurmd needs a cgroup plugin even with none of the cgroup
plugins configured: see CGROUP_CONF. tests/SCHEDULERS.md lists what the real programs do.

Use `slurm_cluster(...)` as a context manager, or the `slurm` fixture in tests/conftest.py (start_slurm).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from tests.helpers.simhosts import (
    Hosts,
    background,
    fleet_hostnames,
    kill_namespace,
    layout_tag,
    simulated_hosts,
    started_or_skip,
    why_no_namespaces,
)

DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")
CLIENTS = ("srun", "sbatch", "scancel", "squeue", "sinfo", "scontrol")
INSTALL_HINT = "apt-get install -y slurm-wlm munge (scripts/dev.sh test does it where root and apt-get are)"
PARTITION = "sim"
# Job states after which nothing of the job runs (COMPLETING is not one: its epilog may still run).
JOB_ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
             "DEADLINE")


def why_no_slurm() -> str | None:
    """Why a Slurm cluster cannot be made here (the exact reason a test skips with), or None."""
    reason = why_no_namespaces()
    if reason:
        return reason
    for tool in (*DAEMONS, *CLIENTS):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"`{tool}` is not installed ({INSTALL_HINT})"
    return None


class SlurmError(RuntimeError):
    """A daemon did not start or a wait ran out: the message says which, with the log's tail."""


def _tail(path: Path, lines: int = 15) -> str:
    """The last lines of a daemon's log file and of its stdout/stderr (`.out` beside it)."""
    parts = []
    for one in (path, path.with_suffix(".out")):
        with contextlib.suppress(OSError):
            text = one.read_text(errors="replace").splitlines()
            if text:
                parts.append(f"[{one.name}]\n" + "\n".join(text[-lines:]))
    return "\n".join(parts) or f"(nothing in {path} or its .out)"


def _exe(tool: str) -> str:
    return shutil.which(tool) or str(Path("/usr/sbin", tool))


@dataclass
class SlurmCluster:
    hosts: Hosts
    folder: Path
    conf: Path
    hosts_file: Path
    controller: int
    kill_wait: int
    started: tuple[str, ...] = ()  # the nodes whose slurmd the cluster started: those a test may be given
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def hostnames(self) -> tuple[str, ...]:
        return self.hosts.hostnames

    @property
    def munge_socket(self) -> Path:
        return self.folder / "munge" / "munge.sock"

    def log(self, name: str) -> Path:
        """A daemon's log: 'munged', 'slurmctld' or a hostname (its slurmd)."""
        return self.folder / "log" / f"{name}.log"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment for a client: SLURM_CONF set, no SLURM_* inherited from an outer job."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
        env["SLURM_CONF"] = str(self.conf)
        env.update(extra or {})
        return env

    def command(self, argv: Sequence[str], host: int = 0) -> list[str]:
        """argv run as a host (its namespace, hostname and /etc/hosts)."""
        return self.hosts.command(host, self.hosts_file, [str(a) for a in argv])

    def run(self, argv: Sequence[str], host: int = 0, *, env: dict[str, str] | None = None, timeout: float = 30,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        """A client command (srun, sbatch, squeue, scancel, sinfo, scontrol, ...) run on a host.

        env: added to `self.env()`. Raises subprocess.TimeoutExpired (the command is killed) past timeout."""
        return subprocess.run(self.command(argv, host), capture_output=True, text=True, timeout=timeout,
                              env=self.env(env), cwd=cwd or self.folder)

    def popen(self, argv: Sequence[str], host: int = 0, *, env: dict[str, str] | None = None,
              cwd: Path | None = None, **kwargs) -> subprocess.Popen:
        """A client command started in the background on a host (stdout/stderr pipes, text, own session)."""
        return background(self.command(argv, host), self.env(env), cwd or self.folder, **kwargs)

    # --- node states -------------------------------------------------------------------------------

    def node_states(self) -> dict[str, str]:
        """{hostname: sinfo's compact state ('idle', 'alloc', 'unk*', 'down*', ...)} as slurmctld sees it now."""
        done = self.run(["sinfo", "--noheader", "--Node", "--format", "%N %t"], timeout=15)
        if done.returncode:
            raise SlurmError(f"sinfo failed ({done.returncode}): {done.stderr.strip()}")
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def wait_nodes(self, hostnames: Sequence[str], states: Sequence[str] = ("idle",), timeout: float = 30) -> None:
        """Until every named node is in one of `states`; SlurmError naming the stragglers past timeout."""
        deadline = time.monotonic() + timeout
        now: dict[str, str] = {}
        while True:
            self._check_alive()
            with contextlib.suppress(SlurmError, subprocess.TimeoutExpired):
                now = self.node_states()
                if all(now.get(h) in states for h in hostnames):
                    return
            if time.monotonic() > deadline:
                late = {h: now.get(h, "?") for h in hostnames if now.get(h) not in states}
                logs = "\n".join(f"--- {h}'s slurmd:\n{_tail(self.log(h))}" for h in late)
                raise SlurmError(f"nodes not {'/'.join(states)} after {timeout:.0f}s: {late}\n"
                                 f"--- slurmctld:\n{_tail(self.log('slurmctld'))}\n{logs}")
            time.sleep(0.3)

    def wait_job_exit(self, job_id: str, timeout: float = 150) -> int:
        """The job's exit code once it has ended (scontrol's ExitCode), polled every 0.3 s.

        `sbatch --wait` would say the same, but it polls after 2, 8 and then 32 s (while the sleep is
        below MinJobAge / 2), so a 10-second job holds it for 42 s."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.run(["scontrol", "show", "job", "--oneliner", job_id], timeout=15)
            fields = dict(item.partition("=")[::2] for item in done.stdout.split())
            if fields.get("JobState") in JOB_ENDED:
                code, _, signal_number = fields["ExitCode"].partition(":")
                return int(code) if int(signal_number) == 0 else 128 + int(signal_number)
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} not ended after {timeout:.0f}s: {done.stdout.strip()} "
                                 f"{done.stderr.strip()}")
            time.sleep(0.3)

    def wait_job_gone(self, job_id: str, timeout: float = 30) -> None:
        """Until squeue no longer lists the job (finished, cancelled or failed); SlurmError past timeout."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.run(["squeue", "--noheader", "--jobs", job_id, "--format", "%i %T"], timeout=15)
            if done.returncode == 0 and not done.stdout.strip():
                return
            if "Invalid job id" in done.stderr:
                return
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} still listed after {timeout:.0f}s: {done.stdout.strip()} "
                                 f"{done.stderr.strip()}")
            time.sleep(0.3)

    # --- daemons -----------------------------------------------------------------------------------

    def _start(self, name: str, host: int, argv: list[str]) -> subprocess.Popen:
        with open(self.folder / "log" / f"{name}.out", "ab") as sink:
            proc = subprocess.Popen(self.command(argv, host), stdin=subprocess.DEVNULL, stdout=sink,
                                    stderr=subprocess.STDOUT, env=self.env(), cwd=self.folder,
                                    start_new_session=True)
        self.daemons[name] = proc
        return proc

    def _check_alive(self) -> None:
        for name, proc in self.daemons.items():
            if proc.poll() is not None:
                raise SlurmError(f"{name} exited with {proc.returncode}:\n{_tail(self.log(name))}")

    def start_slurmd(self, host: int) -> None:
        """Start the slurmd of a host (does not wait for it to register: see wait_nodes)."""
        name = self.hostnames[host]
        if name in self.daemons and self.daemons[name].poll() is None:
            return
        (self.folder / "spool" / name).mkdir(parents=True, exist_ok=True)
        self._start(name, host, [_exe("slurmd"), "-D", "-f", str(self.conf), "-N", name])

    def stop_slurmd(self, host: int, sig: int = signal.SIGKILL) -> None:
        """Stop a host's slurmd (SIGKILL by default: the node vanishes without telling slurmctld).
        Its slurmstepd and tasks keep running: kill_host() ends those too."""
        proc = self.daemons.pop(self.hostnames[host], None)
        if proc is not None:
            _stop(proc, sig)

    def kill_host(self, host: int) -> None:
        """Everything in a host's namespace dies at once (slurmd, slurmstepd, tasks; slurmctld too on its host)."""
        self.stop_slurmd(host)
        kill_namespace(self.hosts.namespaces[host])


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 5) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)


# slurmd 22.05 initialises its cgroup plugin whatever the other plugins are, and `ip netns exec`
# mounts a fresh /sys with nothing at /sys/fs/cgroup ("No filesystem mounted on /sys/fs/cgroup",
# slurmd exits). With no plugin that uses cgroups, the v1 plugin pointed at an empty folder of
# our own is content and never creates a cgroup there.
CGROUP_CONF = """\
CgroupPlugin=cgroup/v1
CgroupMountpoint={folder}/cgroup
CgroupAutomount=no
"""


def fake_gpus(folder: Path, count: int) -> None:
    """gres.conf naming `count` GPUs per node, backed by character devices folder/dev/nvidia<i>.

    gres/gpu refuses a plain file ("is not a valid character or block device") and takes the index
    for CUDA_VISIBLE_DEVICES from the number in the name; nothing ever opens them, and if anything
    did it would get /dev/null (major 1, minor 3)."""
    dev = folder / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(count):
        path = dev / f"nvidia{i}"
        if not path.exists():
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (folder / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={dev}/nvidia[0-{count - 1}]\n")


def slurm_conf(hosts: Hosts, folder: Path, controller: int = 0, cpus: int = 4, kill_wait: int = 5,
               gpus: int = 0, extra: str = "") -> str:
    """slurm.conf for the layout: every host a node (started or not), one partition holding all."""
    f = folder
    gres = f" Gres=gpu:{gpus}" if gpus else ""
    nodes = "".join(f"NodeName={h} NodeAddr={a} CPUs={cpus} RealMemory=1000{gres} State=UNKNOWN\n"
                    for h, a in zip(hosts.hostnames, hosts.addresses, strict=True))
    return f"""\
# Written by tests/helpers/simslurm.py for simulated hosts; every address is inside a namespace it made.
ClusterName=nbsim
SlurmctldHost={hosts.hostnames[controller]}({hosts.addresses[controller]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={f}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={f}/ctld
SlurmctldPidFile={f}/ctld/slurmctld.pid
SlurmctldLogFile={f}/log/slurmctld.log
SlurmdSpoolDir={f}/spool/%n
SlurmdPidFile={f}/spool/%n.pid
SlurmdLogFile={f}/log/%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
{"GresTypes=gpu" if gpus else ""}
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait={kill_wait}
InactiveLimit=0
MinJobAge=30
MessageTimeout=10
SlurmdTimeout=30
{extra}
{nodes}PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def slurm_cluster(count: int, folder: Path, tag: str, *, hostnames: Sequence[str] | None = None,
                  started: Sequence[int] | None = None, controller: int = 0, cpus: int = 4, kill_wait: int = 5,
                  gpus: int = 0, extra_conf: str = "", timeout: float = 30) -> Iterator[SlurmCluster]:
    """`count` simulated hosts, all of them Slurm nodes, named node01, node02, ... (or `hostnames`) so
    that Slurm's hostlists come out compressed as on real clusters (`node[01-03]`); slurmd started on
    `started` (all by default) and waited for until idle. A node left out stays `unk`, then `down*`.

    folder: an empty directory for the conf, munge key and socket, state, spool, pid and log files.
    tag: keeps parallel runs apart (simhosts' namespace names). kill_wait: slurm.conf's KillWait
    (seconds between SIGTERM and SIGKILL on scancel; Slurm's default is 30). gpus: that many
    pretend GPUs per node (gres/gpu on device nodes that are /dev/null's twins, see fake_gpus), so that
    `--gpus-per-node` / `--gpus-per-task` set CUDA_VISIBLE_DEVICES as on a GPU cluster. extra_conf:
    lines added to slurm.conf."""
    folder = Path(folder)
    started = tuple(range(count)) if started is None else tuple(started)
    hostnames = tuple(hostnames or fleet_hostnames(count, digits=2))
    with simulated_hosts(count, tag, hostnames=hostnames) as hosts:
        for sub in ("munge", "ctld", "spool", "log"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / "munge").chmod(0o755)  # munged wants every user able to reach its socket
        conf = folder / "slurm.conf"
        conf.write_text(slurm_conf(hosts, folder, controller, cpus, kill_wait, gpus, extra_conf))
        if gpus:
            fake_gpus(folder, gpus)
        (folder / "cgroup").mkdir(exist_ok=True)
        (folder / "cgroup.conf").write_text(CGROUP_CONF.format(folder=folder))
        cluster = SlurmCluster(hosts, folder, conf, hosts.hosts_file(folder), controller, kill_wait,
                               started=tuple(hostnames[h] for h in started))
        try:
            key = folder / "munge" / "munge.key"
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
            cluster._start("munged", controller, [
                _exe("munged"), "--foreground", "--force", f"--socket={cluster.munge_socket}", f"--key-file={key}",
                f"--pid-file={folder}/munge/munged.pid", f"--seed-file={folder}/munge/munged.seed",
                f"--log-file={cluster.log('munged')}", "--num-threads=4"])
            _wait(lambda: cluster.munge_socket.exists(), timeout, "munged's socket", cluster, "munged")
            cluster._start("slurmctld", controller, [_exe("slurmctld"), "-D", "-f", str(conf)])
            _wait(lambda: cluster.run(["scontrol", "ping"], controller, timeout=15).returncode == 0, timeout,
                  "slurmctld to answer `scontrol ping`", cluster, "slurmctld")
            for host in started:
                cluster.start_slurmd(host)
            cluster.wait_nodes(cluster.started, ("idle",), timeout)
            yield cluster
        finally:
            # Nothing of the cluster's state is kept, so no daemon is given time to save it.
            for proc in cluster.daemons.values():
                _stop(proc, signal.SIGKILL)
            cluster.daemons.clear()
            for namespace in hosts.namespaces:
                kill_namespace(namespace)


def _wait(ready, timeout: float, what: str, cluster: SlurmCluster, daemon: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        cluster._check_alive()
        with contextlib.suppress(subprocess.TimeoutExpired):
            if ready():
                return
        if time.monotonic() > deadline:
            raise SlurmError(f"waited {timeout:.0f}s for {what}; {daemon}'s log:\n{_tail(cluster.log(daemon))}")
        time.sleep(0.2)


def start_slurm(tmp_path_factory, count: int, **kwargs):
    """For a fixture to yield from: a real Slurm cluster (slurm_cluster's keywords), or a skip naming why not;
    every daemon killed and every namespace deleted afterwards."""
    yield from started_or_skip(why_no_slurm, lambda: slurm_cluster(count, tmp_path_factory.mktemp("slurm"),
                                                                   layout_tag(), **kwargs))
