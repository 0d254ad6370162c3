"""all_to_allv on real gloo ranks: every distribution's received elements check out on 2 and 3 ranks,
and a sweep records the distribution it ran with."""

from __future__ import annotations

import json

import pytest

from nccl_bench.results.csv_reader import read_rows
from tests.helpers.launch import run_cli

pytestmark = pytest.mark.integration

DISTRIBUTIONS = ("even", "random:0", "random:7", "skewed:1", "skewed:2")
SLOTS = (1, 5, 1000)  # elements per peer slot: a share may round to nothing, or to most of it


def _worker(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    from nccl_bench.ranks import check
    from nccl_bench.ranks.collectives import CALLS, Buffers, OpArgs
    from nccl_bench.units import alltoallv
    from nccl_bench.units.op_table import OPS

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    collective, found = OPS["all_to_allv"], {}
    try:
        for name in DISTRIBUTIONS:
            shares = alltoallv.shares(alltoallv.parse_distribution(name), world_size)
            args = OpArgs(rank, world_size, 0, None, shares)
            for slot in SLOTS:
                send = torch.zeros(world_size * slot)
                recv = torch.full((world_size * slot,), float(check.SENTINEL))
                check.fill_input(send, rank, "sum")
                CALLS["all_to_allv"](Buffers(send, recv), args)()
                segments = collective.segments(rank, world_size, 0, recv.numel(), shares)
                received = sum(segment.length for segment in segments)
                wrong = check.count_wrong(recv, segments, world_size, "sum")
                if received:  # a received element changed is counted: the check can fail
                    recv[segments[-1].start + segments[-1].length - 1 if segments[-1].length else 0] += 100
                    caught = check.count_wrong(recv, segments, world_size, "sum")
                else:
                    caught = 1
                found[f"{name}/{slot}"] = [received, wrong, caught]
    finally:
        dist.destroy_process_group()
    with open(f"{out_dir}/rank{rank}.json", "w") as handle:
        json.dump(found, handle)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_distribution_has_no_wrong_element(tmp_path, world_size):
    import torch.multiprocessing as mp

    # forked: the ranks inherit the imported torch instead of importing it again
    mp.start_processes(_worker, args=(world_size, str(tmp_path / "pg"), str(tmp_path)), nprocs=world_size,
                       start_method="fork")
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(world_size)]
    for key in results[0]:
        per_rank = [result[key] for result in results]
        assert [wrong for _, wrong, _ in per_rank] == [0] * world_size, key
        assert all(caught == 1 for _, _, caught in per_rank), key
    received = {key: [result[key][0] for result in results] for key in results[0]}
    assert received["even/1000"] == [world_size * 1000] * world_size
    # skewed:1: rank 0 is the hot peer and receives a full slot from everyone; the others a quarter between them
    cold = int(1000 * 0.25 / (world_size - 1))
    assert received["skewed:1/1000"] == [world_size * 1000] + [world_size * cold] * (world_size - 1)
    assert len({tuple(r) for k, r in received.items() if k.startswith("random:")}) > 1  # seeds differ


def test_a_sweep_records_its_distribution_and_counts_the_whole_buffer(tmp_path):
    out = tmp_path / "run"
    result = run_cli(["sweep", "--no-plot",
                      "--workers", "2", "--op", "all_to_allv", "--alltoallv", "SKEWED", "--sizes", "8K",
                      "--iters", "2", "-w", "0", "--out", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = read_rows(out)
    assert (row.op, row.size_bytes, row.count, row.wrong, row.busbw_factor) == ("all_to_allv", 8192, 1024, 0, 0.5)
    assert json.loads((out / "meta.json").read_text())["config"]["alltoallv"] == "skewed:1"
    assert "all_to_allv shares skewed:1: 62% of each size is sent" in result.stdout
