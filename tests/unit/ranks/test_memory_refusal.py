"""The memory refusal's numbers add up: buffers + the share kept free for torch, NCCL and the OS, shown
above what is available, as the test that refused them found (ranks/preflight.py)."""

from __future__ import annotations

import re

import pytest

from nccl_bench.errors import OptionError
from nccl_bench.ranks.preflight import MEMORY_HEADROOM, check_memory, memory_refusal

MIB = 2**20


def test_a_need_that_fits_but_not_with_the_margin_says_the_margin():
    """A sweep of 6,176 MiB on a GPU with 6,301 MiB free: it fits, the 10% kept free does not."""
    assert memory_refusal(6176 * MIB, 1, 6301 * MIB, "GPU 0", "sweep") == (
        "the sweep needs 6,176 MiB of GPU 0 memory (1 rank(s) x 6,176 MiB) + 631 MiB kept free for torch, NCCL "
        "and the OS (10% of it) = 6,807 MiB, but only 6,301 MiB is available")
    with pytest.raises(OptionError, match=r"= 6,807 MiB, but only 6,301 MiB is available; lower \{sizes\}$"):
        check_memory(6176 * MIB, 1, 6301 * MIB, "GPU 0", "sizes", "sweep")


@pytest.mark.parametrize("per_rank,ranks,available", [
    (6176 * MIB, 1, 6301 * MIB), (MIB + 1, 3, 3 * MIB + 5), (10 * MIB, 9, 100 * MIB - 1), (1, 1, 1),
    (451 * MIB, 2, 1000 * MIB + 12345),
])
def test_every_refusal_shows_a_sum_above_what_is_available(per_rank, ranks, available):
    assert per_rank * ranks > available * MEMORY_HEADROOM  # what check_memory refuses
    said = memory_refusal(per_rank, ranks, available, "host", "sweep")
    need, kept, total, shown = (int(n.replace(",", "")) for n in re.findall(
        r"needs ([\d,]+) MiB .*\+ ([\d,]+) MiB kept .* = ([\d,]+) MiB, but only ([\d,]+) MiB", said)[0])
    assert need + kept == total > shown


def test_a_need_with_room_for_the_margin_is_not_refused():
    check_memory(900 * MIB, 1, 1000 * MIB, "GPU 0", "sizes", "sweep")


def test_a_size_no_option_lowers_says_what_to_do_instead():
    """A replay's buffers are its traces' largest collective: no value of TRACE... is there to lower."""
    from nccl_bench.replay.replay_plan import MEMORY_REMEDY

    with pytest.raises(OptionError) as refused:
        check_memory(6176 * MIB, 1, 6301 * MIB, "GPU 0", "traces", "replay", MEMORY_REMEDY)
    assert refused.value.problem.endswith("is available; its buffers are the traces' largest collective: free "
                                          "memory, or replay where there is more")
    assert "{traces}" not in refused.value.problem and "lower" not in refused.value.problem
