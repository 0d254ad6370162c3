"""Real Open MPI `mpirun` across simulated hosts (simhosts.py), with an rsh agent instead of ssh.

mpirun runs as one host (host 0 by default: its namespace, hostname and /etc/hosts) and starts
its `orted` on every other host through `--mca plm_rsh_agent <folder>/agent`, a script called as
`agent HOST COMMAND...` like ssh. The agent enters HOST's namespace with that host's hostname and
/etc/hosts and runs COMMAND under `sh -c`, with the bare environment sshd gives a root login
(PATH, HOME, USER, LOGNAME, SHELL and nothing else): as over ssh, ranks on other hosts see only
what mpirun forwards (`-x NAME`, OMPI_* variables), while ranks on mpirun's own host are forked by
mpirun and inherit its whole environment. No tree spawn (every orted is started from mpirun's
host), TCP (oob and btl) only on eth0, the bridge, and session directories under the folder.
Every process left in the namespaces is killed before they are deleted.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
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

INSTALL_HINT = "apt-get install -y openmpi-bin (scripts/dev.sh test does it where root and apt-get are)"
# What sshd hands a root login on Debian, and nothing more.
LOGIN_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
             "USER": "root", "LOGNAME": "root", "SHELL": "/bin/sh"}
RUN_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def why_no_mpi() -> str | None:
    """Why mpirun cannot run on simulated hosts here (the exact reason a test skips with), or None."""
    reason = why_no_namespaces()
    if reason:
        return reason
    for tool in ("mpirun", "orted"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed ({INSTALL_HINT})"
    return None


def agent_script(hosts: Hosts, hosts_file: Path) -> str:
    """The rsh agent: `agent HOST COMMAND...` runs COMMAND as HOST, as `ssh HOST COMMAND...` would."""
    pairs = zip(hosts.hostnames, hosts.namespaces, strict=True)
    cases = "".join(f"  {shlex.quote(h)}) ns={shlex.quote(n)} ;;\n" for h, n in pairs)
    login = " ".join(f"{k}={shlex.quote(v)}" for k, v in LOGIN_ENV.items())
    enter = 'mount --bind "$1" /etc/hosts && hostname "$2" && exec sh -c "$3"'
    return f"""#!/bin/sh
# Written by tests/helpers/simmpi.py: mpirun's rsh agent for simulated hosts (ssh's place, no network login).
host="$1"; shift
case "$host" in
{cases}  *) echo "simmpi agent: no simulated host named '$host'" >&2; exit 255 ;;
esac
exec env -i {login} ip netns exec "$ns" unshare --uts --mount \\
  sh -c '{enter}' agent {shlex.quote(str(hosts_file))} "$host" "$*"
"""


@dataclass
class MpiHosts:
    hosts: Hosts
    folder: Path
    hosts_file: Path
    agent: Path

    @property
    def hostnames(self) -> tuple[str, ...]:
        return self.hosts.hostnames

    def options(self) -> list[str]:
        """mpirun's options for simulated hosts: root allowed, the agent, TCP on the bridge only."""
        return ["--allow-run-as-root", "--mca", "plm_rsh_agent", str(self.agent), "--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "oob_tcp_if_include", "eth0", "--mca", "btl_tcp_if_include", "eth0",
                "--mca", "btl", "self,tcp", "--mca", "orte_tmpdir_base", str(self.folder / "tmp")]

    def hostfile(self, slots: int | Sequence[int] = 1, name: str = "hostfile") -> Path:
        """A hostfile naming every host (`node01 slots=N`); slots per host, or one number for all."""
        counts = [slots] * len(self.hostnames) if isinstance(slots, int) else list(slots)
        path = self.folder / name
        path.write_text("".join(f"{h} slots={n}\n" for h, n in zip(self.hostnames, counts, strict=True) if n))
        return path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """mpirun's environment: this process's, without an outer launcher's layout, root allowed."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "SLURM_"))}
        env.update(RUN_AS_ROOT)
        env.update(extra or {})
        return env

    def command(self, args: Sequence[str], host: int = 0) -> list[str]:
        """`mpirun <options> ARGS` run as a host."""
        return self.hosts.command(host, self.hosts_file, ["mpirun", *self.options(), *[str(a) for a in args]])

    def mpirun(self, args: Sequence[str], host: int = 0, *, env: dict[str, str] | None = None, timeout: float = 60,
               cwd: Path | None = None) -> subprocess.CompletedProcess:
        """Run `mpirun <options> ARGS` from a host; env is added to `self.env()`. TimeoutExpired past timeout."""
        return subprocess.run(self.command(args, host), capture_output=True, text=True, timeout=timeout,
                              env=self.env(env), cwd=cwd or self.folder)

    def popen(self, args: Sequence[str], host: int = 0, *, env: dict[str, str] | None = None,
              cwd: Path | None = None, **kwargs) -> subprocess.Popen:
        """`mpirun <options> ARGS` started in the background (stdout/stderr pipes, text, own session)."""
        return background(self.command(args, host), self.env(env), cwd or self.folder, **kwargs)


@contextlib.contextmanager
def mpi_hosts(count: int, folder: Path, tag: str, *, hostnames: Sequence[str] | None = None) -> Iterator[MpiHosts]:
    """`count` simulated hosts named node01, node02, ... (or `hostnames`) ready for mpirun; afterwards every
    process in their namespaces is killed (orted, ranks) and the namespaces are deleted."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hostnames = tuple(hostnames or fleet_hostnames(count, digits=2))
    with simulated_hosts(count, tag, hostnames=hostnames) as hosts:
        try:
            hosts_file = hosts.hosts_file(folder)
            agent = folder / "agent"
            agent.write_text(agent_script(hosts, hosts_file))
            agent.chmod(0o755)
            (folder / "tmp").mkdir(exist_ok=True)  # session directories (orte_tmpdir_base), not /tmp
            yield MpiHosts(hosts, folder, hosts_file, agent)
        finally:
            for namespace in hosts.namespaces:
                kill_namespace(namespace)


def start_mpi(tmp_path_factory, count: int, **kwargs):
    """For a fixture to yield from: simulated hosts ready for a real mpirun (mpi_hosts), or a skip naming why
    not; every process in them killed and the namespaces deleted afterwards."""
    yield from started_or_skip(why_no_mpi, lambda: mpi_hosts(count, tmp_path_factory.mktemp("mpi"), layout_tag(),
                                                             **kwargs))
