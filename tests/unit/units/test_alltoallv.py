"""all_to_allv's shares: the distributions' grammar, their matrices, and nccl-tests' rounding."""

from __future__ import annotations

import pytest

from nccl_bench.units import alltoallv
from nccl_bench.units.alltoallv import Distribution, parse_distribution


@pytest.mark.parametrize("text, parsed", [
    ("even", Distribution("even")), ("RANDOM", Distribution("random", 0)), ("random:42", Distribution("random", 42)),
    ("skewed", Distribution("skewed", 1)), (" Skewed:3 ", Distribution("skewed", 3)),
])
def test_the_grammar(text, parsed):
    assert parse_distribution(text) == parsed
    assert parse_distribution(str(parsed)) == parsed


@pytest.mark.parametrize("text, problem", [
    ("zipf", "'zipf' is not one of even, random[:SEED], skewed[:HOT]"), ("even:2", "even takes no parameter"),
    ("skewed:0", "at least 1 hot peer"), ("random:x", "must be a whole number, got 'x'"), ("random:-1", "0 or more"),
])
def test_bad_distributions_say_why(text, problem):
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_distribution(text)


def test_skewed_gives_the_hot_peers_four_fifths_of_every_rank_s_data():
    matrix = alltoallv.shares(Distribution("skewed", 2), 6)
    assert matrix == ((1.0, 1.0, 0.125, 0.125, 0.125, 0.125),) * 6
    assert sum(matrix[0][:2]) / sum(matrix[0]) == 0.8
    assert alltoallv.shares(Distribution("skewed", 9), 4) == ((1.0,) * 4,) * 4  # every peer hot: even


def test_random_is_one_matrix_per_seed_within_the_slot():
    first = alltoallv.shares(Distribution("random", 5), 4)
    assert first == alltoallv.shares(Distribution("random", 5), 4)
    assert first != alltoallv.shares(Distribution("random", 6), 4)
    assert all(0 <= share < 1 for row in first for share in row)
    assert first[0][0] == pytest.approx(0.6229016948897019)  # Mersenne Twister's first draw for seed 5


def test_counts_round_down_as_nccl_tests_does_and_the_mean_share_is_what_is_sent():
    matrix = ((1.0, 0.5), (0.26, 0.0))
    assert alltoallv.split_counts(matrix, 10) == ((10, 5), (2, 0))
    assert alltoallv.mean_share(matrix) == pytest.approx(1.76 / 4)
    assert alltoallv.mean_share(alltoallv.shares(Distribution("even"), 3)) == 1.0
