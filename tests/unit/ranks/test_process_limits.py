"""Limits of the process that run out (open files, processes or threads, memory): one line naming the
ulimit to raise, whatever error type carries them (torch's store says EMFILE in a RuntimeError)."""

from __future__ import annotations

import errno
import resource

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.ranks import preflight


@pytest.fixture
def limits(monkeypatch):
    """getrlimit answering from a dict: (soft, hard) per resource; the rest unlimited."""
    values: dict[int, tuple[int, int]] = {}
    unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    monkeypatch.setattr(resource, "getrlimit", lambda which: values.get(which, unlimited))
    return values


def test_open_files_that_ran_out_name_the_limit(limits):
    limits[resource.RLIMIT_NOFILE] = (64, 1 << 20)
    store = RuntimeError("The server socket has failed to bind. port: 0, useIpv6: 0, code: -24, name: EMFILE, "
                         "message: too many open files")
    expected = "too many open files: each process may open 64 (ulimit -n); raise it (ulimit -n 4096)"
    assert preflight.exhausted_resource_text(store) == expected
    assert preflight.exhausted_resource_text(OSError(errno.EMFILE, "Too many open files")) == expected


def test_a_hard_limit_below_the_suggestion_is_named(limits):
    limits[resource.RLIMIT_NOFILE] = (64, 256)
    assert preflight.exhausted_resource_text(OSError(errno.EMFILE, "x")).endswith("raise it (ulimit -n 256, the "
                                                                                    "hard limit)")
    limits[resource.RLIMIT_NOFILE] = (20, 20)
    with pytest.raises(UserInputError, match=r"the hard limit is 20 too \(as root, or in /etc/security/limits.conf\)"):
        preflight.check_process_limits()


def test_processes_threads_and_memory_that_ran_out(limits):
    limits[resource.RLIMIT_NPROC] = (100, 100)
    assert preflight.exhausted_resource_text(OSError(errno.EAGAIN, "Resource temporarily unavailable")) == (
        "cannot start another process or thread: Resource temporarily unavailable (the limit on processes is 100, "
        "ulimit -u); raise it, or end other processes of this user")
    assert "the limit on processes is 100" in preflight.exhausted_resource_text(RuntimeError("can't start new thread"))
    assert preflight.exhausted_resource_text(MemoryError()) == "out of memory; free memory"
    limits[resource.RLIMIT_AS] = (2 * 2**30, 2 * 2**30)
    assert preflight.exhausted_resource_text(OSError(errno.ENOMEM, "x")) == (
        "out of memory within the address-space limit of 2,048 MiB; raise it (ulimit -v) or free memory")
    assert preflight.exhausted_resource_text(OSError(errno.ENFILE, "x")).startswith("the system's table of open files")


def test_other_failures_are_not_a_limit(limits):
    assert preflight.exhausted_resource_text(OSError(errno.ENOSPC, "No space left on device")) is None
    assert preflight.exhausted_resource_text(RuntimeError("something else")) is None


def test_limits_high_enough_pass(limits):
    limits[resource.RLIMIT_NOFILE] = (preflight.MIN_OPEN_FILES, preflight.MIN_OPEN_FILES)
    limits[resource.RLIMIT_AS] = (preflight.MIN_ADDRESS_SPACE, preflight.MIN_ADDRESS_SPACE)
    preflight.check_process_limits()
