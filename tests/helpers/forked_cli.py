"""`python -m nccl_bench ARGS` (or torchrun) in a process forked from one that has already imported torch.

A command that looks at the host (its backend, its memory) or starts workers imports torch first,
about 2.5 s of a 2-core host's time per command. Here one server process imports torch and the
command line once, then forks a child per command: the child gets the case's working
folder, environment, address-space limit and argv, its own stdout and stderr files, and runs the
module exactly as `python -m` would, through the same entry and exit. The ranks such a command starts
through torch's agent (local workers, torchrun) are forked too, from a clean copy of the command made
before it runs (rank_zygote.py). A case whose environment differs in what an interpreter reads as it
starts (PYTHONPATH, ...) gets a fresh interpreter instead; the cost of the imports is left to
benchmarks/startup.py and to the cases that start their own process.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.helpers import rank_zygote
from tests.helpers.rank_zygote import startup_variables

_SERVER = r"""
import importlib.util, json, os, resource, runpy, sys

import torch, torch.distributed, torch.distributed.run  # noqa: F401 - what each command imports first
import nccl_bench.cli.entry, nccl_bench.sweep.sweep_body, nccl_bench.doctor.doctor_body  # noqa: F401

spec = importlib.util.spec_from_file_location("_rank_zygote", sys.argv[1])
rank_zygote = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rank_zygote)

requests, replies = sys.stdin, os.fdopen(os.dup(1), "w")
for line in requests:
    case = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(replies.fileno())  # the child and what it starts never hold the server's reply pipe
            os.chdir(case["cwd"])
            os.environ.clear()
            os.environ.update(case["env"])
            if case["address_space"]:
                limit = case["address_space"]
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            for fd, path in ((1, case["stdout"]), (2, case["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.argv = ["-m", *case["argv"]]
            rank_zygote.install()
            runpy.run_module(case["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = rank_zygote.exit_code(exc.code)
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    replies.write(json.dumps({"pid": pid}) + "\n")
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
    replies.flush()
"""


class ForkServer:
    """One process that has imported torch and the command line, forking a child per command it is sent."""

    def __init__(self, env: dict[str, str], cwd: Path):
        self.env = dict(env)
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, rank_zygote.__file__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=cwd)
        self.folder = Path(tempfile.mkdtemp(prefix="forked-cli-"))
        self.count = 0
        self.unread = b""  # replies read from the pipe but not yet taken: see _reply

    def run(self, module: str, argv: list[str], cwd: Path, env: dict[str, str], address_space: int | None,
            timeout: float) -> subprocess.CompletedProcess:
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        case = {"module": module, "argv": argv, "cwd": str(cwd), "env": env, "address_space": address_space,
                "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        pid = self._reply(60)["pid"]
        try:
            code = self._reply(timeout)["code"]
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self._reply(30)
            raise
        return subprocess.CompletedProcess([sys.executable, "-m", module, *argv], code, out.read_text(),
                                           err.read_text())

    def _reply(self, timeout: float) -> dict:
        """The server's next reply line. Read from the descriptor, never through a buffered file: a child
        that ends at once makes both of its lines (pid, code) arrive together, and a buffered readline
        would keep the second where select() cannot see it, waiting out the timeout for a reply that came."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.unread:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise RuntimeError(f"the forked-cli server ended (exit {self.proc.wait()})")
            self.unread += chunk
        line, self.unread = self.unread.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()  # the server's loop ends with its input
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: ForkServer | None = None


def run_forked(argv: list[str], *, cwd: Path, env: dict[str, str], address_space: int | None = None,
               timeout: float = 120, module: str = "nccl_bench") -> subprocess.CompletedProcess:
    """`python -m MODULE ARGV` in `cwd` with exactly `env`, forked from the shared server (started on
    first use with this environment, ended at exit); a CompletedProcess as subprocess.run gives.

    MODULE is nccl_bench or torch.distributed.run (torchrun); the workers either of them starts are
    forked from the command's zygote (rank_zygote.py), each as a fresh `python -u -m nccl_bench` would run."""
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = ForkServer(env, cwd)
        atexit.register(_server.close)
    if startup_variables(env) != startup_variables(_server.env):  # a fork would not see them changed
        return run_fresh(argv, cwd=cwd, env=env, address_space=address_space, timeout=timeout, module=module)
    return _server.run(module, argv, cwd, env, address_space, timeout)


def run_fresh(argv: list[str], *, cwd: Path, env: dict[str, str], address_space: int | None = None,
              timeout: float = 120, module: str = "nccl_bench") -> subprocess.CompletedProcess:
    """`python -m MODULE ARGV` in a fresh interpreter, imports and all, as a user starts it."""
    def bounded() -> None:
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run([sys.executable, "-m", module, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=bounded)
