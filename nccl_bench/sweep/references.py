"""What a sweep's rows are set against, found once on rank 0 and shared: the busbw ceiling for %peak
(--peak, else what `limits` detects) and the system whose public figures the rows are matched with
(hardware/expected.py)."""

from __future__ import annotations

from nccl_bench.hardware.expected import System
from nccl_bench.ranks import dist
from nccl_bench.sweep import sweep_config as cfg

NO_PEAK_ONE_RANK = "none: a world of 1 rank crosses no link (give one with --peak)"


def reference_peak(config: cfg.SweepConfig, ctx: dist.DistContext, nodes: int) -> tuple[float | None, str | None]:
    """The busbw ceiling for %peak: --peak, else what `limits` detects on rank 0, shared with all."""
    if config.peak_gbps is not None:
        return config.peak_gbps, f"{config.peak_gbps:g} GB/s (given with --peak)"
    if ctx.world_size == 1:  # busbw of one rank crosses no link (broadcast's reads 25,935 GB/s on an H100)
        return None, NO_PEAK_ONE_RANK
    found = None
    if ctx.rank == 0:
        from nccl_bench.hardware.detect import detect_peak

        peak, warnings = detect_peak(multi_node=nodes > 1, device_kind=ctx.device.type)
        if peak is None:
            found = (None, "unknown (" + "; ".join(warnings) + "); give one with --peak")
        else:
            found = (peak.peak_gbps, f"{peak.peak_gbps:.1f} GB/s per direction, {peak.label} [{peak.source}]")
    return tuple(dist.gather_objects(ctx, found)[0])


def expected_system(ctx: dist.DistContext, nodes: int) -> System | None:
    """Rank 0 on GPUs: the system public figures are matched against (hardware/expected.py); None on
    other ranks, on CPUs (no figure is for them), with uneven ranks per node (no figure is for such a
    layout) and when detection fails."""
    if ctx.rank != 0 or not ctx.on_gpu or ctx.world_size % nodes:
        return None
    from nccl_bench.hardware.detect import detect_limits

    try:
        return System.from_limits(detect_limits(measure_host=False), nodes, ctx.world_size // nodes)
    except Exception:  # a yardstick is a nicety, never a reason to abort a sweep
        return None
