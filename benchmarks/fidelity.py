"""Does nccl_bench report what a minimal hand-written loop measures? And how far off is the naive way?

Run under a launcher, e.g.:

    torchrun --nproc_per_node 2 benchmarks/fidelity.py --rounds 7

For every (op, size) and in every round, three methods run back to back on the same process
group and the same preallocated buffers (A B C, A B C, ...), so machine drift hits all alike:

  reference   barrier, N back-to-back ops, one sync, time per op = elapsed / N, max over ranks;
              N fixed per point from a pilot (fastest of a few ~20 ms blocks) so the loop lasts
              at least --min-sample-ms, as one would pick N by hand.
  nccl_bench  the sweep's own PointRunner with the sweep's default TimingPlan (warmup,
              --iters auto calibration, per-op timestamps), exactly as `nccl-bench sweep` runs it.
  naive       the blog method this project started from: warm up once, time.time() around one
              op with a barrier inside the timed region, max over ranks.

The verdict uses the median over rounds of the per-round ratio nccl_bench / reference:
busbw within 5% at >= 1 MiB, time per op (latency) within 10% at 1 KiB and 64 KiB.
Rank 0 prints the table; --json also writes every round's numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
SIZES = ("1K", "64K", "1M", "16M", "64M")
MIN_ROUNDS = 7  # fewer rounds cannot out-vote a burst of load on a shared host
BUSBW_TOLERANCE = 0.05  # nccl_bench's busbw within 5% of the reference loop's, time within 10%
LATENCY_TOLERANCE = 0.10
BUSBW_FROM_BYTES = 1024**2  # busbw judged at >= 1 MiB ...
LATENCY_SIZES = (1024, 64 * 1024)  # ... latency at exactly these sizes
REFERENCE_WARMUP = 5  # same count as the sweep's default warmup
PILOT_BLOCK_S = 0.02  # the reference's N comes from the fastest of PILOT_REPEATS blocks this long
PILOT_REPEATS = 3


# Bus-bandwidth factors written out again (nccl-tests doc/PERFORMANCE.md), so the reference
# shares no code with the tool under test beyond torch.
def _busbw_factor(op: str, n: int) -> float:
    ring = (n - 1) / n
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": ring, "reduce_scatter": ring, "broadcast": 1.0}[op]


@dataclass
class PointResult:
    op: str
    size_bytes: int
    reference_iters: int
    reference_us: list[float] = field(default_factory=list)
    nccl_bench_us: list[float] = field(default_factory=list)
    nccl_bench_p50_us: list[float] = field(default_factory=list)
    nccl_bench_iters: list[int] = field(default_factory=list)
    naive_us: list[float] = field(default_factory=list)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS,
                        help=f"interleaved rounds (>= {MIN_ROUNDS} for a verdict)")
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated collectives")
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated sizes (K/M/G = powers of 1024)")
    parser.add_argument("--min-sample-ms", type=float, default=None,
                        help="reference loop length and nccl_bench's sample floor (default: the sweep's)")
    parser.add_argument("--json", type=Path, default=None, help="also write every round's numbers here")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import torch

    from nccl_bench.ranks import dist, preflight
    from nccl_bench.ranks.devices import device_kind
    from nccl_bench.ranks.layout import detect_launch
    from nccl_bench.ranks.runner import PointRunner, TimingPlan
    from nccl_bench.ranks.set_up import SetUp
    from nccl_bench.sweep import sweep_config as cfg
    from nccl_bench.sweep.plan import buffer_bytes, plan_points
    from nccl_bench.units.sizes import parse_size

    launch = detect_launch()
    if launch is None:
        print("fidelity.py: run under torchrun, e.g. torchrun --nproc_per_node 2 benchmarks/fidelity.py",
              file=sys.stderr)
        return 2
    ops = tuple(op.strip() for op in args.ops.split(",") if op.strip())
    sizes = tuple(parse_size(s.strip(), "--sizes") for s in args.sizes.split(",") if s.strip())
    config = cfg.SweepConfig(ops=ops, sizes=sizes, min_sample_ms=args.min_sample_ms)
    backend = preflight.chosen_backend("auto")
    on_gpu = device_kind(backend) == "cuda"
    points, _notes = plan_points(config, launch.world_size, on_gpu)
    points = _one_placement_per_op(points, ops)
    min_sample_s = cfg.min_sample_ms(config, on_gpu) / 1e3
    # The sweep's own default plan (see sweep/sweep_body.py): what `nccl-bench sweep` would use.
    plan = TimingPlan(warmup=config.warmup, iters=config.iters, min_sample_s=min_sample_s,
                      trials=config.trials, agg=config.agg, blocking=config.blocking, cuda_graph=config.cuda_graph)

    with dist.process_group(launch, backend, config.timeout_s, set_up=SetUp()) as ctx:
        dtype = getattr(torch, config.dtype)
        element_bytes = cfg.DTYPE_BYTES[config.dtype]
        send_bytes, recv_bytes = buffer_bytes(points, element_bytes)
        send_store = torch.zeros(max(send_bytes // element_bytes, 1), dtype=dtype, device=ctx.device)
        recv_store = torch.zeros(max(recv_bytes // element_bytes, 1), dtype=dtype, device=ctx.device)
        sync = torch.cuda.synchronize if ctx.on_gpu else (lambda: None)
        runner = PointRunner(ctx, plan)

        results, bound = _bind_points(points, ctx, sync, send_store, recv_store, min_sample_s)

        load_before = os.getloadavg()
        _run_rounds(args.rounds, results, bound, runner, ctx, sync)
        load_after = os.getloadavg()

        if ctx.rank == 0:
            verdict = _report(args, results, ctx.world_size, backend, min_sample_s, load_before, load_after)
        else:
            verdict = 0
    return verdict


def _one_placement_per_op(points, ops: tuple[str, ...]) -> list:
    """One placement per op: out-of-place where torch has it (what nccl-tests' first columns show)."""
    chosen: dict[tuple[str, int], object] = {}
    for point in points:
        key = (point.op, point.size_bytes)
        if key not in chosen or point.placement == "out_of_place":
            chosen[key] = point
    return [chosen[key] for key in sorted(chosen, key=lambda k: (ops.index(k[0]), k[1]))]


def _max_over_ranks(ctx, value: float) -> float:
    import torch
    import torch.distributed as tdist

    tensor = torch.tensor([value], dtype=torch.float64, device=ctx.device)
    tdist.all_reduce(tensor, op=tdist.ReduceOp.MAX)
    return tensor.item()


def _reference_op(point, buffers):
    """Direct torch.distributed calls, independent of nccl_bench's registry."""
    import torch.distributed as tdist

    send, recv = buffers.send, buffers.recv
    if point.op == "all_reduce":
        return lambda: tdist.all_reduce(recv)
    if point.op == "all_gather":
        return lambda: tdist.all_gather_into_tensor(recv, send)
    if point.op == "reduce_scatter":
        return lambda: tdist.reduce_scatter_tensor(recv, send)
    if point.op == "broadcast":
        return lambda: tdist.broadcast(recv, src=0)
    raise ValueError(f"no reference loop for {point.op}")


def _reference(ctx, sync, call, n: int) -> float:
    import torch.distributed as tdist

    for _ in range(REFERENCE_WARMUP):
        call()
    sync()
    tdist.barrier()
    start = time.perf_counter()
    for _ in range(n):
        call()
    sync()
    return _max_over_ranks(ctx, (time.perf_counter() - start) / n) * 1e6


def _naive(ctx, sync, call) -> float:
    import torch.distributed as tdist

    call()  # the blog's single warmup op
    sync()
    tdist.barrier()
    start = time.time()
    call()
    sync()
    tdist.barrier()
    return _max_over_ranks(ctx, time.time() - start) * 1e6


def _reference_iters(ctx, sync, ref_call, min_sample_s: float) -> int:
    """The reference loop's N: from the fastest of PILOT_REPEATS pilot blocks, agreed by every rank."""
    from nccl_bench.ranks.runner import MAX_AUTO_ITERS, MIN_AUTO_ITERS

    pilot_us = math.inf
    for _ in range(PILOT_REPEATS):
        block = 1
        while (block_us := _reference(ctx, sync, ref_call, block)) * block < PILOT_BLOCK_S * 1e6:
            block *= 2
        pilot_us = min(pilot_us, block_us)
    n = max(MIN_AUTO_ITERS, min(MAX_AUTO_ITERS, math.ceil(min_sample_s * 1e6 / pilot_us)))
    return int(_max_over_ranks(ctx, n))


def _bind_points(points, ctx, sync, send_store, recv_store, min_sample_s: float):
    """Each point's result record and its (reference call, nccl_bench call) on the shared buffers."""
    import torch.distributed as tdist

    from nccl_bench.ranks.collectives import CALLS, OpArgs, make_buffers
    from nccl_bench.units.op_table import OPS

    results: list[PointResult] = []
    bound = []
    for point in points:
        collective = OPS[point.op]
        buffers = make_buffers(collective, point.placement, send_store, recv_store,
                               point.send_elems, point.recv_elems, ctx.rank, ctx.world_size)
        op_args = OpArgs(ctx.rank, ctx.world_size, 0, tdist.ReduceOp.SUM if collective.reduces else None)
        ref_call = _reference_op(point, buffers)
        n = _reference_iters(ctx, sync, ref_call, min_sample_s)
        results.append(PointResult(point.op, point.size_bytes, n))
        bound.append((ref_call, CALLS[point.op](buffers, op_args)))
    return results, bound


def _run_rounds(rounds: int, results: list[PointResult], bound, runner, ctx, sync) -> None:
    """Every round runs the three methods back to back on every point (A B C, A B C, ...)."""
    started = time.perf_counter()
    for round_index in range(rounds):
        for result, (ref_call, tool_call) in zip(results, bound, strict=True):
            result.reference_us.append(_reference(ctx, sync, ref_call, result.reference_iters))
            measurement = runner.measure(tool_call)
            result.nccl_bench_us.append(measurement.time_us)
            result.nccl_bench_p50_us.append(_percentile50(measurement.per_op_us))
            result.nccl_bench_iters.append(measurement.iters)
            result.naive_us.append(_naive(ctx, sync, ref_call))
        if ctx.rank == 0:
            print(f"# round {round_index + 1}/{rounds} done ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)


def _report(args, results: list[PointResult], world_size: int, backend: str, min_sample_s: float,
            load_before, load_after) -> int:
    """Rank 0's table (and --json), and the exit status: 0 when every judged point met its target."""
    lines, all_met = render(results, world_size, args.rounds, backend, load_before, load_after)
    print("\n".join(lines), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({
            "backend": backend, "world_size": world_size, "rounds": args.rounds,
            "min_sample_ms": min_sample_s * 1e3, "loadavg_before": load_before, "loadavg_after": load_after,
            "points": [asdict(r) for r in results],
        }, indent=1))
    return 0 if all_met else 1


def _percentile50(values) -> float:
    return _median(list(values))


def _pooled_lines(results: list[PointResult]) -> list[str]:
    """Every round's ratio of every point in one pool per target class.

    A point's 7-round median cannot resolve 5% when single rounds differ 2x on a loaded host;
    the pooled median over all points and rounds can, and shows whether nccl_bench is biased.
    """
    classes = (("busbw, >= 1 MiB", lambda r: r.size_bytes >= BUSBW_FROM_BYTES, True),
               ("time, 1 KiB and 64 KiB", lambda r: r.size_bytes in LATENCY_SIZES, False))
    lines = []
    for label, member, as_busbw in classes:
        ratios = [(ref / nb if as_busbw else nb / ref)
                  for r in results if member(r) for nb, ref in zip(r.nccl_bench_us, r.reference_us, strict=True)]
        naive = [(ref / nv if as_busbw else nv / ref)
                 for r in results if member(r) for nv, ref in zip(r.naive_us, r.reference_us, strict=True)]
        if ratios:
            ordered = sorted(ratios)
            quartiles = (ordered[len(ordered) // 4], ordered[(3 * len(ordered)) // 4])
            lines.append(f"# pooled {label}: nccl_bench/reference median {_median(ratios):.3f} "
                         f"(quartiles {quartiles[0]:.2f}..{quartiles[1]:.2f}, {len(ratios)} ratios); "
                         f"naive/reference median {_median(naive):.3f}")
    return lines


def _busbw_gbps(op: str, size_bytes: int, time_us: float, n: int) -> float:
    return size_bytes / (time_us * 1e-6) / 1e9 * _busbw_factor(op, n)


def _fmt_time(us: float) -> str:
    return f"{us:,.1f}" if us >= 100 else f"{us:.2f}"


def render(
    results: list[PointResult], n: int, rounds: int, backend: str, load_before, load_after
) -> tuple[list[str], bool]:
    """The table (medians over rounds) and whether every judged point met its target."""
    from nccl_bench.units.sizes import format_size

    lines = [
        f"# fidelity: backend {backend}, {n} ranks, {rounds} interleaved rounds (reference, nccl_bench, naive)",
        f"# load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}",
        "# times are mean us per op, median over rounds; ratios are medians of per-round ratios;",
        "# nb/ref and naive/ref are time ratios (busbw ratio = 1 / time ratio); nb p50 = median single op",
        f"{'op':<15}{'size':>6}{'ref N':>7}{'ref us':>11}{'nb us':>11}{'nb p50':>10}{'naive us':>11}"
        f"{'ref GB/s':>10}{'nb GB/s':>9}{'naive GB/s':>11}{'nb/ref':>8}{'[min..max]':>15}{'naive/ref':>10}  target",
    ]
    all_met = True
    for r in results:
        time_ratios = [nb / ref for nb, ref in zip(r.nccl_bench_us, r.reference_us, strict=True)]
        naive_ratios = [nv / ref for nv, ref in zip(r.naive_us, r.reference_us, strict=True)]
        ref_us, nb_us, naive_us = _median(r.reference_us), _median(r.nccl_bench_us), _median(r.naive_us)
        time_ratio = _median(time_ratios)
        if r.size_bytes >= BUSBW_FROM_BYTES:
            busbw_ratio = _median([1 / x for x in time_ratios])
            met = abs(busbw_ratio - 1) <= BUSBW_TOLERANCE
            target = f"busbw ratio {busbw_ratio:.3f}, +-{BUSBW_TOLERANCE:.0%}: {'met' if met else 'MISSED'}"
        elif r.size_bytes in LATENCY_SIZES:
            met = abs(time_ratio - 1) <= LATENCY_TOLERANCE
            target = f"time ratio {time_ratio:.3f}, +-{LATENCY_TOLERANCE:.0%}: {'met' if met else 'MISSED'}"
        else:
            met, target = True, "(not judged)"
        if rounds < MIN_ROUNDS:
            target = f"(only {rounds} rounds; need {MIN_ROUNDS})"
        else:
            all_met = all_met and met
        lines.append(
            f"{r.op:<15}{format_size(r.size_bytes):>6}{r.reference_iters:>7}{_fmt_time(ref_us):>11}{_fmt_time(nb_us):>11}"
            f"{_fmt_time(_median(r.nccl_bench_p50_us)):>10}{_fmt_time(naive_us):>11}"
            f"{_busbw_gbps(r.op, r.size_bytes, ref_us, n):>10.3f}{_busbw_gbps(r.op, r.size_bytes, nb_us, n):>9.3f}"
            f"{_busbw_gbps(r.op, r.size_bytes, naive_us, n):>11.3f}{time_ratio:>8.3f}"
            f"{f'[{min(time_ratios):.2f}..{max(time_ratios):.2f}]':>15}{_median(naive_ratios):>10.2f}  {target}"
        )
    lines.extend(_pooled_lines(results))
    lines.append(f"# verdict: {'every judged point meets its target' if all_met else 'some point MISSED its target'}"
                 if rounds >= MIN_ROUNDS else f"# verdict: none (fewer than {MIN_ROUNDS} rounds)")
    return lines, all_met


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
