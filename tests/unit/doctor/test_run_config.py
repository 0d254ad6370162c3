"""The doctor's host grouping (a pure part of doctor/doctor_body.py)."""

from __future__ import annotations

from nccl_bench.doctor.doctor_body import group_nodes
from nccl_bench.doctor.doctor_report import Node


def test_group_nodes_by_hostname_in_rank_order():
    assert group_nodes(["b", "b", "a", "a", "b"]) == [Node("b", (0, 1, 4)), Node("a", (2, 3))]
    assert group_nodes(["x"]) == [Node("x", (0,))]
