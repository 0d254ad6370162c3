"""A real filesystem that fills up: a tmpfs of a few KiB or MiB mounted for one test (needs root).

`fill(folder)` takes every free byte, so the next write fails with ENOSPC as on a full disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def small_disk(folder: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of size_bytes mounted at folder for the block; the test is skipped without root."""
    if os.geteuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root; this test runs as uid {os.geteuid()}")
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed as root (a container without CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Take every free byte of folder's filesystem."""
    with open(folder / "filler", "ab", buffering=0) as handle:
        block = b"\0" * 4096
        while True:
            try:
                handle.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        for size in (512, 64, 1):  # the last partial block
            with contextlib.suppress(OSError):
                while handle.write(b"\0" * size):
                    pass
