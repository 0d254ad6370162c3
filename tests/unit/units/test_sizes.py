import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.units.sizes import (
    RangeNames,
    count_sizes,
    decimal_size,
    format_size,
    geometric_sizes,
    linear_sizes,
    parse_size,
)


@pytest.mark.parametrize(
    "text, expected",
    [("8", 8), ("1K", 1024), ("1k", 1024), ("64M", 64 * 2**20), ("1G", 2**30), ("1KiB", 1024), ("2KB", 2048),
     ("1.5K", 1536), (4096, 4096)],
)
def test_parse_size_uses_powers_of_1024(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1X", "-1", "0", "1.3", "1e3", "K"])
def test_parse_size_rejects_malformed_and_names_option(text):
    with pytest.raises(UserInputError) as info:
        parse_size(text, "--min-bytes")
    assert info.value.option == "--min-bytes"


def test_decimal_size_counts_powers_of_1000_as_gb_per_second_does():
    sizes = (0, 999, 1000, 31_502_336, 8_196_000, 999_999, 2**30, 10**15)
    assert [decimal_size(s) for s in sizes] == ["0 B", "999 B", "1 kB", "31.5 MB", "8.2 MB", "1 MB", "1.07 GB",
                                                "1000 TB"]


def test_format_size_is_exact_and_short():
    assert [format_size(s) for s in (8, 1024, 1536, 2**20, 3 * 2**30)] == ["8", "1K", "1536", "1M", "3G"]


def test_geometric_sizes_match_nccl_tests_b_e_f():
    assert geometric_sizes(8, 128, 2) == [8, 16, 32, 64, 128]
    assert geometric_sizes(1024, 1024 * 100, 4) == [1024, 4096, 16384, 65536]


def test_geometric_sizes_reject_bad_factor_and_range_naming_the_callers_options():
    names = RangeNames("--min-bytes", "--max-bytes", "--step-factor", "--step-bytes")
    with pytest.raises(UserInputError) as info:
        geometric_sizes(8, 64, 1, names)
    assert info.value.option == "--step-factor"
    with pytest.raises(UserInputError) as info:
        geometric_sizes(128, 64, 2, names)
    assert info.value.option == "--min-bytes" and info.value.problem == "128 is above --max-bytes 64"


def test_linear_sizes_step_in_bytes():
    assert linear_sizes(1000, 4000, 1000) == [1000, 2000, 3000, 4000]


def test_count_sizes_matches_the_sequences_without_building_them():
    assert count_sizes(1, 2**30, step_bytes=1) == 2**30  # arithmetic: nothing is built
    assert count_sizes(8, 2**30) == len(geometric_sizes(8, 2**30, 2)) == 28
    assert count_sizes(1000, 4000, step_bytes=1000) == 4
    assert count_sizes(1, 20, 1.5) == len([1, 2, 3, 5, 7, 11, 17])


def test_count_sizes_stops_one_past_the_cap():
    # a factor barely above 1 from 1 byte to 1 GiB: millions of distinct sizes, counted only to the cap
    assert count_sizes(1, 2**30, 1.000001, at_most=100) == 101


def test_geometric_sizes_with_a_factor_near_one_skip_repeated_steps():
    # 1.00000001 repeats each whole byte count ~100,000 times; the sizes are still each byte from 1K to 2K
    assert geometric_sizes(1024, 2048, 1.00000001) == list(range(1024, 2049))
