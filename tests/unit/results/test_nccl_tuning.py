"""NCCL's tuning lines read back into an algorithm and a protocol.

The lines of NCCL 2.20-2.22 are quoted from public logs:
- https://github.com/NVIDIA/nccl/issues/1595 (NCCL_ALGO=Ring NCCL_PROTO=Simple forced; the maintainer
  reads "Algo 1 proto 2" as RING/SIMPLE in the same thread),
- https://github.com/NVIDIA/nccl/issues/1453 (an H100 cluster's 262144-byte all_reduce: Tree/LL128).
The named format of NCCL 2.24 and later is NCCL's own format string, src/enqueue.cc
(https://github.com/NVIDIA/nccl/blob/v2.26.2-1/src/enqueue.cc: "%s: %ld Bytes -> Algo %s proto %s
channel{Lo..Hi}={%d..%d}"); NAMED_LINE is a line of that format as it appears in a public run log on
GitHub (the code-search index that found it did not name its repository), NAMED_LINES are built from
the format string. The 2.23 format ("%s: %ld Bytes -> Algo %d proto %d time %f") is built from
https://github.com/NVIDIA/nccl/blob/v2.23.4-1/src/enqueue.cc.
"""

from __future__ import annotations

import pytest

from nccl_bench.results.nccl_tuning import TuningLine, chosen, parse_line

ISSUE_1595 = "[0] NCCL INFO 805306368 Bytes -> Algo 1 proto 2 time 3970.683594"
ISSUE_1595_SMALL = "[0] NCCL INFO 1026048 Bytes -> Algo 1 proto 2 time 34.693867"
ISSUE_1453 = "[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 262144 Bytes -> Algo 0 proto 1 time 54.707825"
NAMED_LINE = ("tpgds-aihub0007:185302:185302 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto SIMPLE "
              "channel{Lo..Hi}={0..0}")
V2_23_LINE = "host:1:1 [0] NCCL INFO AllGather: 8388608 Bytes -> Algo 4 proto 2 time 40.125000"


@pytest.mark.parametrize("line, parsed", [
    (ISSUE_1595, TuningLine(None, 805306368, "RING", "SIMPLE")),
    (ISSUE_1595_SMALL, TuningLine(None, 1026048, "RING", "SIMPLE")),
    (ISSUE_1453, TuningLine(None, 262144, "TREE", "LL128")),
    (NAMED_LINE, TuningLine("AllReduce", 4, "RING", "SIMPLE")),
    (V2_23_LINE, TuningLine("AllGather", 8388608, "NVLS", "SIMPLE")),
    ("host:1:1 [0] NCCL INFO Algo 9 proto 7", None),
    ("host:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f757de00400 recvbuff 0x7f757de00400 count 1", None),
])
def test_each_format_of_the_tuning_line_is_read(line, parsed):
    assert parse_line(line) == parsed


def test_an_unknown_number_stays_a_number():
    assert parse_line("[0] NCCL INFO 64 Bytes -> Algo 9 proto 5 time 1.0") == TuningLine(None, 64, "9", "5")


def test_the_point_is_the_most_frequent_choice_of_its_own_collective_and_byte_count():
    named = [f"h:1:1 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo {algo} proto {proto} channel{{Lo..Hi}}={{0..7}}"
             for algo, proto in [("NVLS", "SIMPLE")] * 20]
    bookkeeping = ["h:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}",
                   "h:1:1 [0] NCCL INFO AllGather: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"]
    assert chosen(bookkeeping + named, "all_reduce", 1048576) == ("NVLS", "SIMPLE")
    assert chosen(bookkeeping + named, "all_gather", 1024) == ("RING", "LL")
    assert chosen([ISSUE_1453] * 14 + [ISSUE_1595], "all_reduce", 262144) == ("TREE", "LL128")
    assert chosen(named, "sendrecv", 1048576) is None  # point-to-point: NCCL logs no choice for it
    assert chosen(["NCCL INFO NCCL version 2.26.2+cuda12.2"], "all_reduce", 4) is None


def test_nccl_trace_cuda_graph_point_not_credited_with_the_barriers_algorithm():
    """A 256 MiB all_reduce replayed from a CUDA graph: NCCL logged its 8 ops once, at capture; every
    timed sample then added a 4-byte barrier line and an 8-byte exchange line of the run's own."""
    captured = ["h:1:1 [0] NCCL INFO AllReduce: 268435456 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}"] * 8
    per_sample = ["h:1:1 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}",
                  "h:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"] * 30
    assert chosen(captured + per_sample, "all_reduce", 268435456) == ("NVLS", "SIMPLE")
    assert chosen(per_sample, "all_reduce", 268435456) is None  # nothing of the point's own: no guess
