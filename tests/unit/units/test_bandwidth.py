import pytest

from nccl_bench.ranks.collectives import REGISTRY
from nccl_bench.units import bandwidth


@pytest.mark.parametrize("n, expected", [(1, 0.0), (2, 1.0), (3, 4 / 3), (4, 1.5), (7, 12 / 7), (8, 1.75)])
def test_all_reduce_factor_is_2_n_minus_1_over_n(n, expected):
    assert bandwidth.all_reduce_factor(n) == pytest.approx(expected, abs=0, rel=1e-15)


@pytest.mark.parametrize("n, expected", [(1, 0.0), (2, 0.5), (3, 2 / 3), (5, 0.8), (8, 0.875)])
def test_gather_like_factor_is_n_minus_1_over_n(n, expected):
    assert bandwidth.gather_like_factor(n) == pytest.approx(expected, abs=0, rel=1e-15)


def test_factors_per_op_follow_nccl_tests_performance_md():
    n = 3
    expected = {
        "all_reduce": 4 / 3, "all_gather": 2 / 3, "reduce_scatter": 2 / 3, "all_to_all": 2 / 3,
        "gather": 2 / 3, "scatter": 2 / 3, "broadcast": 1.0, "reduce": 1.0, "sendrecv": 1.0,
    }
    for name, factor in expected.items():
        assert REGISTRY[name].factor(n) == pytest.approx(factor, rel=1e-15), name
    assert REGISTRY["barrier"].factor is None


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
