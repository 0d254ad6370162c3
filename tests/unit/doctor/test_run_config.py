"""The doctor's option parsing and host grouping (pure parts of doctor/run.py)."""

from __future__ import annotations

import pytest

from nccl_bench.doctor.run import Node, build_config, group_nodes, parse_phases, resolve_size
from nccl_bench.errors import UserInputError


def test_group_nodes_by_hostname_in_rank_order():
    assert group_nodes(["b", "b", "a", "a", "b"]) == [Node("b", (0, 1, 4)), Node("a", (2, 3))]
    assert group_nodes(["x"]) == [Node("x", (0,))]


def test_parse_phases():
    assert parse_phases(None) == ("nodes", "pairs")
    assert parse_phases(["pairs,nodes"]) == ("nodes", "pairs")
    assert parse_phases(["pairs", "pairs"]) == ("pairs",)
    with pytest.raises(UserInputError, match="--phase: unknown phase 'links'"):
        parse_phases(["links"])


def test_build_config_and_size():
    config = build_config(size_bytes=1026, iters=None, quick=True)
    assert config.quick and config.iters == 4 and resolve_size(config, on_gpu=False) == 1024
    assert resolve_size(build_config(), on_gpu=True) == 256 * 1024**2
    assert resolve_size(build_config(), on_gpu=False) == 4 * 1024**2
    with pytest.raises(UserInputError, match="--samples: must be at least 1, got 0"):
        build_config(samples=0)
