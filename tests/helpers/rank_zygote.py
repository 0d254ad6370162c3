"""Ranks started by a forked command are forked from a clean copy of it (a zygote), not fresh interpreters.

A command the suite runs through forked_cli starts its ranks through torch's agent (local workers,
torchrun), and each rank would import torch again: about 1.6 s of a core, most of a rank's CPU time in
the suite. So the command, right after it is forked from the server and before it runs anything, forks
a zygote: a copy that has torch and the tool imported and has run nothing. Each rank the agent starts
is forked from the zygote (twice, so that it is reparented to the command, made a child subreaper) and
runs `python -u -m MODULE ARGS` as a fresh interpreter would: its argv, environment, folder, standard
streams, session, exit handlers and exit code. The agent holds a subprocess.Popen for it as for any
child, and polls, waits for and signals its pid. A rank whose environment differs in what an
interpreter reads as it starts gets a fresh interpreter, as forked_cli's commands do (startup_variables).

This file is loaded by path in the server (forked_cli._SERVER), so it imports nothing of the tests.
"""

from __future__ import annotations

import atexit
import ctypes
import io
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_REQUEST_BYTES = 1 << 20  # a rank's argv and environment, as JSON
_ADOPTION_S = 10.0  # the middle process ends at once; a rank waits no longer than this to be adopted
# Read as an interpreter starts or as torch loads: the interpreter's own, the loader's, c10's logging.
_STARTUP_PREFIXES = ("PYTHON", "LD_", "TORCH_CPP_LOG_LEVEL")


def startup_variables(env: dict[str, str]) -> dict[str, str]:
    """The variables of `env` that only a fresh interpreter would see changed."""
    return {name: value for name, value in env.items() if name.startswith(_STARTUP_PREFIXES)}


def install() -> None:
    """In the command, before it runs: fork the zygote and make torch's agent start ranks through it.

    Leaves the command as it is where this torch's agent starts its workers otherwise, or where the
    kernel refuses to make the command a subreaper: its ranks are then fresh interpreters."""
    try:
        from torch.distributed.elastic.multiprocessing.subprocess_handler import subprocess_handler
    except ImportError:
        return
    if getattr(subprocess_handler, "Popen", None) is not subprocess.Popen:
        return
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        ours.close()
        _serve(theirs)
    theirs.close()
    subprocess_handler.Popen = _popen_through(ours, startup_variables(dict(os.environ)))


def _popen_through(zygote: socket.socket, zygote_startup: dict[str, str]) -> type[subprocess.Popen]:
    lock = threading.Lock()

    class RankPopen(subprocess.Popen):
        """subprocess.Popen whose `python -u -m MODULE ...` child is forked from the zygote."""

        def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, *rest):
            (_startupinfo, _creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
             _restore_signals, gid, gids, uid, umask, start_new_session, process_group) = rest
            child_env = dict(os.environ if env is None else env)
            module_argv = _module_argv(args)
            plain = (module_argv is None or shell or executable is not None or preexec_fn is not None or pass_fds
                     or not close_fds or any(v not in (None, -1) for v in (gid, gids, uid, umask, process_group))
                     or startup_variables(child_env) != zygote_startup)
            if plain:
                return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env, *rest)
            request = {"argv": module_argv, "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                       "env": child_env, "new_session": bool(start_new_session), "pgid": os.getpgid(0)}
            fds = [fd if fd != -1 else default for fd, default in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2))]
            try:
                with lock:
                    socket.send_fds(zygote, [json.dumps(request).encode()], fds)
                    reply = zygote.recv(_REQUEST_BYTES)
                if not reply:
                    raise OSError("the rank zygote has ended")
                self.pid = json.loads(reply)["pid"]
                self._child_created = True
            finally:
                self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    return RankPopen


def _module_argv(args) -> list[str] | None:
    """[MODULE, ARGS...] of `python -u -m MODULE ARGS...` started with this interpreter; None otherwise."""
    if isinstance(args, (str, bytes)):
        return None
    args = [os.fspath(arg) for arg in args]
    if len(args) >= 4 and args[0] == sys.executable and args[1:3] == ["-u", "-m"]:
        return args[3:]
    return None


def _serve(requests: socket.socket) -> None:
    """The zygote: fork a rank for each request until the command closes its end; never returns."""
    os.setpgid(0, 0)  # a signal to the command's process group is for the command and its ranks, not this
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    os.close(quiet)
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(requests, _REQUEST_BYTES, 3)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)
        pid = _fork_rank(json.loads(message), fds, requests)
        for fd in fds:
            os.close(fd)
        requests.send(json.dumps({"pid": pid}).encode())


def _fork_rank(request: dict, fds: list[int], requests: socket.socket) -> int:
    """Fork the rank through a middle process that exits at once, so that the rank's parent is the command."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        middle_pid = os.getpid()  # read here: once the middle has ended, the rank's getppid() is the command
        rank = os.fork()
        if rank == 0:
            os.close(write_end)
            _run_rank(request, fds, requests, middle_pid)
        os.write(write_end, str(rank).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(middle, 0)  # once the middle has ended, the rank is the command's child
    with os.fdopen(read_end, "rb") as answer:
        return int(answer.read())


def _run_rank(request: dict, fds: list[int], requests: socket.socket, middle_pid: int) -> None:
    """Become `python -u -m MODULE ARGS` with the request's streams, folder, environment and session."""
    code = 1
    try:
        requests.close()
        adopted_by = time.monotonic() + _ADOPTION_S
        while os.getppid() == middle_pid and time.monotonic() < adopted_by:  # until the command adopts it
            os.sched_yield()
        if request["new_session"]:
            os.setsid()
        else:
            os.setpgid(0, request["pgid"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # read again from TMPDIR, as a fresh interpreter would
        sys.stdout, sys.stderr = _unbuffered(1, sys.stdout), _unbuffered(2, sys.stderr)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        module, *argv = request["argv"]
        sys.argv = ["-m", *argv]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        _finish(None)
    except BaseException:
        traceback.print_exc()
    _finish(code)


def _unbuffered(fd: int, stream) -> io.TextIOWrapper:
    """A text stream on `fd` that writes through at once, as `python -u` makes stdout and stderr."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=stream.encoding, errors=stream.errors,
                            write_through=True)


def exit_code(value) -> int:
    """The exit status of an interpreter that ends with SystemExit(value)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _finish(code: int | None) -> None:
    """End as an interpreter does: join the threads it must, run the exit handlers, flush; None: die by SIGINT,
    as an interpreter does whose KeyboardInterrupt reached the top."""
    try:
        threading._shutdown()
    except BaseException:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    if code is None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    os._exit(code)
