import pytest

from nccl_bench.units import bandwidth


@pytest.mark.parametrize("n, expected", [(1, 0.0), (2, 1.0), (3, 4 / 3), (4, 1.5), (7, 12 / 7), (8, 1.75)])
def test_all_reduce_factor_is_2_n_minus_1_over_n(n, expected):
    assert bandwidth.ALL_REDUCE(n) == pytest.approx(expected, abs=0, rel=1e-15)


@pytest.mark.parametrize("n, expected", [(1, 0.0), (2, 0.5), (3, 2 / 3), (5, 0.8), (8, 0.875)])
def test_gather_like_factor_is_n_minus_1_over_n(n, expected):
    assert bandwidth.GATHER_LIKE(n) == pytest.approx(expected, abs=0, rel=1e-15)


@pytest.mark.parametrize(
    "factor, low, high, expected",
    [
        (bandwidth.ALL_REDUCE, 1.74, 1.76, 8),  # 2(n-1)/n = 1.75
        (bandwidth.GATHER_LIKE, 0.74, 0.76, 4),  # (n-1)/n = 0.75
        (bandwidth.ALL_REDUCE, 1.9, 2.5, None),  # open above: many rank counts
        (bandwidth.ALL_REDUCE, 1.2, 1.6, None),  # 3, 4 and 5 ranks all fit
        (bandwidth.WHOLE_BUFFER, 0.99, 1.01, None),  # 1 whatever n
    ],
)
def test_world_size_inverts_the_factor(factor, low, high, expected):
    assert factor.world_size(low, high) == expected


def test_algbw_is_bytes_over_seconds_in_1e9():
    # 1 GiB in 1 second is 1.073741824 GB/s: GB means 1e9 bytes, as nccl-tests prints.
    assert bandwidth.algbw_gbps(2**30, 1e6) == pytest.approx(1.073741824, rel=1e-12)
    assert bandwidth.algbw_gbps(1000, 1.0) == pytest.approx(1.0, rel=1e-12)
    assert bandwidth.algbw_gbps(1000, None) is None
    assert bandwidth.algbw_gbps(1000, 0.0) is None


def test_busbw_multiplies_by_factor_and_keeps_none():
    assert bandwidth.busbw_gbps(10.0, 1.75) == pytest.approx(17.5)
    assert bandwidth.busbw_gbps(None, 1.75) is None
    assert bandwidth.busbw_gbps(10.0, None) is None
