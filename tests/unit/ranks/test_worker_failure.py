"""ranks/launch.worker_failure: failed local workers -> the run's exit code, and a line only when no worker said one."""

from __future__ import annotations

import pytest

from nccl_bench.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_VERDICT
from nccl_bench.ranks.launch import worker_failure


@pytest.mark.parametrize("codes, exit_code", [
    ([EXIT_RUN_FAILED, EXIT_RUN_FAILED], EXIT_RUN_FAILED),
    ([EXIT_VERDICT], EXIT_VERDICT),
    ([EXIT_BAD_INPUT, EXIT_BAD_INPUT], EXIT_BAD_INPUT),
    ([EXIT_VERDICT, EXIT_RUN_FAILED], EXIT_RUN_FAILED),
    ([EXIT_RUN_FAILED, -9], EXIT_RUN_FAILED),
])
def test_a_worker_that_said_why_is_not_followed_by_a_second_line(codes, exit_code):
    failure = worker_failure(codes, 2)
    assert (failure.exit_code, failure.quiet) == (exit_code, True)


def test_workers_that_ended_without_a_report_are_named_by_how_they_ended():
    failure = worker_failure([-9, 130], 2)
    assert (failure.exit_code, failure.quiet) == (EXIT_RUN_FAILED, False)
    assert str(failure) == "2 of 2 local worker(s) ended without a report (killed by SIGKILL, exit code 130)"
