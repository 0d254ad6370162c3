"""Device and backend choices made before any process group: GPU index per launch layout, workers
per GPU, torch versions that change set-up, the NCCL environment defaults."""

from __future__ import annotations

import pytest

from nccl_bench.cli.option_sets import Workers
from nccl_bench.errors import UserInputError
from nccl_bench.option_types import flags_of
from nccl_bench.ranks import devices
from nccl_bench.sweep.sweep_config import SweepConfig


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
    assert devices.cuda_device_index(local_rank, local_world, gpus, environ, launcher) == expected


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
        devices.cuda_device_index(3, 4, 2, environ, launcher)
    assert names in str(caught.value) and "needs 4 GPUs, but 2 is visible" in str(caught.value)


def test_no_visible_gpu_is_refused():
    with pytest.raises(UserInputError, match="none is visible"):
        devices.cuda_device_index(0, 1, 0, {}, "torchrun")


def test_more_workers_than_gpus_is_refused_before_any_starts():
    devices.check_workers_fit(2, 2)
    with pytest.raises(UserInputError) as caught, flags_of(SweepConfig, Workers):  # as the sweep says it
        devices.check_workers_fit(4, 2)
    assert str(caught.value) == ("--workers: 4 NCCL workers need 4 GPUs, but 2 is visible here; "
                                 "use --workers 2 or fewer (or --backend gloo)")


@pytest.mark.parametrize(
    ("version", "parsed"),
    [("2.7.1+cu126", (2, 7, 1)), ("2.11.0+cu130", (2, 11, 0)), ("2.8.0a0+gitabc", (2, 8, 0)), ("2.13.0", (2, 13, 0))],
)
def test_version_tuple(version, parsed):
    assert devices.version_tuple(version) == parsed


@pytest.mark.parametrize(
    ("version", "passes"),
    [("2.2.2", False),  # no device_id parameter before 2.3
     ("2.3.0", True), ("2.5.1+cu124", True),
     ("2.6.0+cu124", False), ("2.7.0", False),  # non-blocking NCCL init can hang (pytorch #153960)
     ("2.7.1+cu126", True), ("2.11.0+cu130", True)],
)
def test_device_id_is_passed_only_where_it_exists_and_cannot_hang(version, passes):
    assert devices.passes_device_id(version) is passes


def test_nccl_environment_defaults_keep_the_process_alive_and_fail_fast():
    assert devices.nccl_env_to_set({}) == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
                                        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "1000"}


def test_a_users_own_nccl_setting_is_kept_under_either_name():
    assert devices.nccl_env_to_set({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}) == {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "1000"}
    assert devices.nccl_env_to_set({"NCCL_ASYNC_ERROR_HANDLING": "1"})["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC" not in devices.nccl_env_to_set({"NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "9"})


@pytest.mark.parametrize("environ, agent, value, set_by", [
    ({}, None, "2", "nccl-bench"),  # no agent: nothing set
    ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, None, "1", "user"),  # srun, mpirun: the user's own
    ({"TORCHELASTIC_RUN_ID": "r", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, {}, "2", "nccl-bench"),  # the agent's 1
    ({"TORCHELASTIC_RUN_ID": "r", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
     {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, "1", "user"),  # set before torchrun: passed on, kept
    ({"TORCHELASTIC_RUN_ID": "r", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, None, "2", "nccl-bench"),  # unreadable
    ({"TORCHELASTIC_RUN_ID": "r", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}, None, "3", "user"),
    ({"TORCHELASTIC_RUN_ID": "r", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_ASYNC_ERROR_HANDLING": "0"}, {},
     "0", "user"),  # the older name, which the agent's TORCH_ value would otherwise override
])
def test_torchrun_error_handling_default_replaced_and_users_value_kept(environ, agent, value, set_by):
    found = devices.error_handling(environ, agent)
    assert (found["value"], found["set_by"]) == (value, set_by)
    assert devices.nccl_env_to_set(environ, agent)["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == value
