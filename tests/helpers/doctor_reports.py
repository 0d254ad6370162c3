"""A judged three-node doctor run and its header, shared by the doctor's text and reporter tests."""

from __future__ import annotations

from nccl_bench.doctor.doctor_report import DoctorHeader, Node
from nccl_bench.doctor.verdicts import judge
from nccl_bench.ranks.run_facts import RunFacts


def three_node_judgement():
    """Nodes a, b, c with two rails; every pair with c is slow, so c is the one suspect."""
    layout = [("a", [0, 1]), ("b", [2, 3]), ("c", [4, 5])]
    pairs = {("a", "b", 0): [2.0, 2.0], ("a", "b", 1): [1.8, 1.8], ("a", "c", 0): [0.2, 0.2],
             ("a", "c", 1): [0.2, 0.2], ("b", "c", 0): [0.2, 0.2], ("b", "c", 1): [0.25, 0.25]}
    return judge(layout, {"a": [10.0, 10.0], "b": [10.5, 10.5], "c": [9.5, 9.5]}, pairs, tolerance=0.2)


def three_node_header(run_dir=None) -> DoctorHeader:
    run = RunFacts(backend="gloo", launcher="torchrun", world_size=6, hostnames=("a", "a", "b", "b", "c", "c"),
                   devices=("cpu",) * 6, versions={"torch": "2.x"}, run_dir=run_dir)
    return DoctorHeader(
        run=run, nodes=(Node("a", (0, 1)), Node("b", (2, 3)), Node("c", (4, 5))),
        size_bytes=4 * 1024**2, iters=4, samples=3, warmup=1, phases=("nodes", "pairs"),
        mode="full", rounds=3, tolerance=0.2, expect_gbps=None, notes=("a note",),
    )
