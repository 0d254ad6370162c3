"""Failure wording: a backend's timeout names the option that set it, once."""

from __future__ import annotations

import pytest

from nccl_bench.ranks import faults


@pytest.mark.parametrize(
    ("reason", "named"),
    [("Timed out waiting 100ms for send operation to complete",
      "Timed out waiting 100ms for send operation to complete (--timeout 0.1 s)"),
     ("Application timeout caused pair closure", "Application timeout caused pair closure (--timeout 0.1 s)"),
     ("Connection closed by peer [127.0.0.1]:5", "Connection closed by peer [127.0.0.1]:5"),
     ("no progress for more than 0.1 s (--timeout 0.1 s)", "no progress for more than 0.1 s (--timeout 0.1 s)")],
)
def test_a_timeout_names_the_option_once(reason, named):
    assert faults.name_timeout(reason, 0.1) == named
