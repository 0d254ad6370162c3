"""Each profile row's communication beside compute (its kernels against its rank's compute union), the most
exposed rank's, the exposed time at another speed, and the rows' exposed time summed at that speed, on
hand-made intervals and times with exact values."""

from __future__ import annotations

from nccl_bench.replay.exposure import (
    WindowProjection,
    most_exposed,
    row_overlap,
    scaled_exposed_us,
    time_at_busbw_us,
    window_projection,
)
from nccl_bench.replay.overlap import Overlap


def test_a_rows_kernels_are_set_against_its_ranks_compute():
    # kernels 0-10 and 8-20 (merged 0-20); compute 5-15: overlapped 10, exposed 10
    assert row_overlap([[(0, 10), (8, 20)]], [[(5, 15)]]) == Overlap(20, 10, 10)
    assert row_overlap([[(0, 10), (8, 20)]], [[(5, 15)]]).overlap_pct == 50


def test_of_several_ranks_the_most_exposed_ranks_figures_are_the_rows():
    # rank 0: 0-10 under compute 0-8 -> exposed 2; rank 1: 0-4 with no compute -> exposed 4; rank 2 holds none
    found = row_overlap([[(0, 10)], [(0, 4)], []], [[(0, 8)], [], [(0, 100)]])
    assert found == Overlap(communication_us=4, overlapped_us=0, exposed_us=4)
    assert found.overlap_pct == 0


def test_a_row_no_rank_holds_kernels_of_has_no_figures():
    assert row_overlap([[], []], [[(0, 1)], []]) is None
    assert most_exposed([None, None]) is None
    assert most_exposed([Overlap(10, 7, 3), None, Overlap(10, 5, 5), Overlap(8, 3, 5)]) == Overlap(10, 5, 5)


def test_the_exposed_time_keeps_its_share_at_another_time_per_call():
    assert scaled_exposed_us(300.0, 200.0, 50.0) == 75.0  # a quarter of the time: a quarter exposed
    assert scaled_exposed_us(300.0, 200.0, 400.0) == 600.0
    assert scaled_exposed_us(None, 200.0, 50.0) is None
    assert scaled_exposed_us(300.0, None, 50.0) is None and scaled_exposed_us(300.0, 0.0, 50.0) is None
    assert scaled_exposed_us(300.0, 200.0, None) is None
    assert scaled_exposed_us(1e300, 1e-300, 1e300) is None  # past a float: no figure rather than inf in the JSON


def test_a_busbw_means_the_time_that_the_jobs_busbw_scales_to():
    # 1,000 us at 10 GB/s busbw: at 40 GB/s the same size and group take 250 us
    assert time_at_busbw_us(1000.0, 10.0, 40.0) == 250.0
    assert time_at_busbw_us(1000.0, None, 40.0) is None and time_at_busbw_us(1000.0, 10.0, 0.0) is None
    assert time_at_busbw_us(None, 10.0, 40.0) is None


def test_the_windows_projection_sums_each_rows_own_projection():
    # three rows exposed 300, 100 and 50 us in the job: the first two projected to 75 and 200, the third
    # without a projection kept at its 50; a row without an exposed time counts in neither sum
    rows = [(300.0, 75.0), (100.0, 200.0), (50.0, None), (None, 10.0)]
    assert window_projection(rows) == WindowProjection(job_us=450.0, projected_us=325.0, rows=3, projected_rows=2)


def test_a_window_with_nothing_projected_has_no_projection():
    assert window_projection([(300.0, None), (None, None)]) is None
    assert window_projection([]) is None
    assert window_projection([(1e308, 1.0), (1e308, 1.0)]) is None  # a sum past a float: none, never inf
