"""Local workers: a stopped worker is found among this process's children, to be ended once a peer exits."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from nccl_bench.ranks import launch


def test_child_states_see_a_stopped_child():
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while launch._child_states(os.getpid()).get(child.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert launch._child_states(os.getpid())[child.pid] == "T"
    finally:
        child.kill()
        child.wait()


def test_the_reaper_kills_a_stopped_worker_once_another_has_exited():
    stopped = subprocess.Popen(["sleep", "30"])
    done = subprocess.Popen(["sleep", "0.5"])
    os.kill(stopped.pid, signal.SIGSTOP)
    with launch._StoppedWorkerReaper():
        done.wait()
        assert stopped.wait(timeout=5) == -signal.SIGKILL


def test_a_stopped_worker_is_left_alone_while_every_worker_runs():
    stopped = subprocess.Popen(["sleep", "30"])
    running = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(stopped.pid, signal.SIGSTOP)
        with launch._StoppedWorkerReaper():
            time.sleep(4 * launch.STOPPED_WATCH_POLL_S)
            assert stopped.poll() is None
    finally:
        for proc in (stopped, running):
            proc.kill()
            proc.wait()
