"""The GPU path's decisions, made without a GPU: device index, torch versions, --cuda-graph exclusions,
the NCCL environment, the recorded environment, one-rank peaks and empty captures."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_bench.config import SweepConfig
from nccl_bench.errors import UserInputError
from nccl_bench.ranks import dist, faults, sweep
from nccl_bench.ranks.runner import FLAG_EMPTY_GRAPH, Measurement, captured_nothing


@pytest.mark.parametrize(
    ("local_rank", "local_world", "gpus", "environ", "launcher", "expected"),
    [
        (3, 8, 8, {}, "torchrun", 3),  # one GPU per rank on the host
        (0, 1, 1, {}, "torchrun", 0),
        (1, 2, 4, {}, "torchrun", 1),  # fewer ranks than GPUs
        # srun --gpus-per-task 1: each task sees only its own GPU, as cuda:0
        (3, 8, 1, {"CUDA_VISIBLE_DEVICES": "3"}, "slurm", 0),
        (3, 8, 1, {"CUDA_VISIBLE_DEVICES": "0"}, "slurm", 0),  # device cgroups renumber it 0
        (5, 8, 2, {"CUDA_VISIBLE_DEVICES": "4,5"}, "slurm", 0),  # --gpus-per-task 2
        (1, 2, 1, {"CUDA_VISIBLE_DEVICES": "1"}, "mpirun", 0),  # a per-rank wrapper script
        (1, 8, 8, {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, "slurm", 1),  # srun, one task per GPU
    ],
)
def test_device_index_for_each_launch_layout(local_rank, local_world, gpus, environ, launcher, expected):
    assert dist.cuda_device_index(local_rank, local_world, gpus, environ, launcher) == expected


@pytest.mark.parametrize(
    ("launcher", "environ", "names"),
    [
        ("torchrun", {}, "torchrun --nproc_per_node 4"),
        # torchrun never narrows visibility per rank: a global CUDA_VISIBLE_DEVICES does not help
        ("torchrun", {"CUDA_VISIBLE_DEVICES": "0,1"}, "torchrun --nproc_per_node 4"),
        ("slurm", {}, "--gpus-per-task 1"),
        ("mpirun", {}, "mpirun with 4 ranks"),
    ],
)
def test_more_local_ranks_than_visible_gpus_is_refused_naming_the_layout(launcher, environ, names):
    with pytest.raises(UserInputError) as caught:
        dist.cuda_device_index(3, 4, 2, environ, launcher)
    assert names in str(caught.value) and "needs 4 GPUs, but 2 is visible" in str(caught.value)


def test_no_visible_gpu_is_refused():
    with pytest.raises(UserInputError, match="none is visible"):
        dist.cuda_device_index(0, 1, 0, {}, "torchrun")


def test_more_workers_than_gpus_is_refused_before_any_starts():
    dist.check_workers_fit(2, 2)
    with pytest.raises(UserInputError) as caught:
        dist.check_workers_fit(4, 2)
    assert str(caught.value) == ("--workers: 4 NCCL workers need 4 GPUs, but 2 is visible here; "
                                 "use --workers 2 or fewer (or --backend gloo)")


@pytest.mark.parametrize(
    ("version", "parsed"),
    [("2.7.1+cu126", (2, 7, 1)), ("2.11.0+cu130", (2, 11, 0)), ("2.8.0a0+gitabc", (2, 8, 0)), ("2.13.0", (2, 13, 0))],
)
def test_version_tuple(version, parsed):
    assert dist.version_tuple(version) == parsed


@pytest.mark.parametrize(
    ("version", "passes"),
    [("2.2.2", False),  # no device_id parameter before 2.3
     ("2.3.0", True), ("2.5.1+cu124", True),
     ("2.6.0+cu124", False), ("2.7.0", False),  # non-blocking NCCL init can hang (pytorch #153960)
     ("2.7.1+cu126", True), ("2.11.0+cu130", True)],
)
def test_device_id_is_passed_only_where_it_exists_and_cannot_hang(version, passes):
    assert dist.passes_device_id(version) is passes


def test_nccl_environment_defaults_keep_the_process_alive_and_fail_fast():
    assert dist.nccl_env_to_set({}) == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
                                        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "1000"}


def test_a_users_own_nccl_setting_is_kept_under_either_name():
    assert dist.nccl_env_to_set({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}) == {
        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "1000"}
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in dist.nccl_env_to_set({"NCCL_ASYNC_ERROR_HANDLING": "1"})


def test_cuda_graph_skips_barrier_with_a_note():
    config = SweepConfig(ops=("all_reduce", "barrier"), sizes=(1024,), cuda_graph=10)
    points, notes = sweep.plan_points(config, 2, on_gpu=True, torch_version="2.11.0")
    assert {p.op for p in points} == {"all_reduce"}
    assert notes == ["barrier skipped: --cuda-graph captures only ops with a bandwidth factor "
                     "(a barrier synchronizes the CPU)"]
    # without --cuda-graph, or on CPU (no capture), barrier stays
    assert "barrier" in {p.op for p in sweep.plan_points(config, 2, on_gpu=False)[0]}


def test_cuda_graph_with_only_barrier_is_refused_naming_both_options():
    config = SweepConfig(ops=("barrier",), sizes=(1024,), cuda_graph=10)
    with pytest.raises(UserInputError) as caught:
        sweep.plan_points(config, 2, on_gpu=True, torch_version="2.11.0")
    assert str(caught.value).startswith("--cuda-graph: nothing left to capture in --op barrier: barrier: ")


def test_cuda_graph_sendrecv_needs_torch_2_7():
    config = SweepConfig(ops=("sendrecv", "all_reduce"), sizes=(1024,), cuda_graph=4)
    points, notes = sweep.plan_points(config, 2, on_gpu=True, torch_version="2.6.0+cu124")
    assert {p.op for p in points} == {"all_reduce"}
    assert notes == ["sendrecv skipped: --cuda-graph cannot capture point-to-point ops on torch 2.6.0+cu124 "
                     "(needs >= 2.7)"]
    points, notes = sweep.plan_points(config, 2, on_gpu=True, torch_version="2.7.1")
    assert {p.op for p in points} == {"all_reduce", "sendrecv"} and notes == []


def test_recorded_environment_is_nccl_and_torch_nccl_only():
    environ = {"NCCL_VERSION": "2.28.3-1", "NCCL_DEBUG": "INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
               "TORCH_FR_BUFFER_SIZE": "0", "TORCH_DISTRIBUTED_DEBUG": "OFF", "HF_TOKEN": "secret", "PATH": "/bin"}
    assert sweep.recorded_env(environ) == {"NCCL_DEBUG": "INFO", "NCCL_VERSION": "2.28.3-1",
                                           "TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}


def test_one_rank_has_no_detected_peak_but_a_given_one_is_kept():
    ctx = SimpleNamespace(world_size=1, rank=0)
    assert sweep._reference_peak(SweepConfig(), ctx, 1) == (None, sweep.NO_PEAK_ONE_RANK)
    assert sweep._reference_peak(SweepConfig(peak_gbps=450.0), ctx, 1) == (450.0, "450 GB/s (given with --peak)")


def _measurement(empty: bool) -> Measurement:
    return Measurement(iters=100_000, sample_means_us=(0.3,), per_op_us=(0.3,), slowest_rank=0,
                       shortest_sample_s=0.03, timer_resolution_s=0.5e-6, empty_graph=empty)


def test_an_empty_capture_is_flagged_and_given_no_bandwidth():
    config = SweepConfig(ops=("broadcast",), sizes=(64 << 20,), cuda_graph=10)
    ctx = SimpleNamespace(world_size=1, rank=0, backend="nccl")
    header = SimpleNamespace(nodes=1)
    point = sweep.Point("broadcast", "in_place", 64 << 20, 16 << 20, 16 << 20)
    collective = sweep.REGISTRY["broadcast"]
    row = sweep._row(config, ctx, header, point, collective, _measurement(True), 0, None)
    assert FLAG_EMPTY_GRAPH in row.flags.split(";")
    assert (row.algbw_gbps, row.busbw_gbps, row.pct_of_peak) == (None, None, None) and row.time_us == 0.3
    full = sweep._row(config, ctx, header, point, collective, _measurement(False), 0, None)
    assert full.algbw_gbps == pytest.approx((64 << 20) / 0.3e-6 / 1e9) and FLAG_EMPTY_GRAPH not in full.flags


def test_torchs_empty_graph_warning_is_recognised():
    warn = SimpleNamespace
    assert captured_nothing([warn(message=UserWarning(
        "The CUDA Graph is empty. This usually means that the graph was attempted to be captured on wrong "
        "device or stream. (Triggered internally at /pytorch/aten/src/ATen/cuda/CUDAGraph.cpp:147.)"))])
    assert not captured_nothing([warn(message=UserWarning("something else"))])
    assert not captured_nothing([])


@pytest.mark.parametrize(
    ("reason", "named"),
    [("Timed out waiting 100ms for send operation to complete",
      "Timed out waiting 100ms for send operation to complete (--timeout 0.1 s)"),
     ("Application timeout caused pair closure", "Application timeout caused pair closure (--timeout 0.1 s)"),
     ("Connection closed by peer [127.0.0.1]:5", "Connection closed by peer [127.0.0.1]:5"),
     ("no progress for more than 0.1 s (--timeout 0.1 s)", "no progress for more than 0.1 s (--timeout 0.1 s)")],
)
def test_a_timeout_names_the_option_once(reason, named):
    assert faults.name_timeout(reason, 0.1) == named


@pytest.mark.parametrize(
    ("raw", "fault"),
    [("", None), ("corrupt", faults.Fault("corrupt")), ("stall", faults.Fault("stall")),
     ("stall:1:2", faults.Fault("stall", 1, 2)), ("stall:0:2:2.5", faults.Fault("stall", 0, 2, 2.5)),
     ("stall-gpu:0:1", faults.Fault("stall-gpu", 0, 1))],
)
def test_planted_fault_grammar(raw, fault):
    assert faults.planted_fault({faults.FAULT_ENV: raw}) == fault


@pytest.mark.parametrize("raw", ["stal", "stall:x", "stall:0:1:2:3"])
def test_a_misspelt_fault_is_refused(raw):
    with pytest.raises(ValueError, match="NCCL_BENCH_FAULT"):
        faults.planted_fault({faults.FAULT_ENV: raw})
