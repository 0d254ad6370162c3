import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.ranks.devices import choose_backend
from nccl_bench.ranks.layout import detect_launch


def test_no_launcher():
    assert detect_launch({}) is None


def test_torchrun_layout():
    env = {
        "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "h", "MASTER_PORT": "1",
    }
    launch = detect_launch(env)
    assert (launch.launcher, launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (
        "torchrun", 3, 8, 1, 2)


def test_slurm_layout_needs_a_step():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NUM_NODES": "2", "MASTER_ADDR": "node1"}
    launch = detect_launch(env)
    assert (launch.launcher, launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (
        "slurm", 5, 8, 1, 4)
    assert launch.master_port == "29500"
    del env["SLURM_STEP_ID"]  # a batch script itself, not an srun step
    assert detect_launch(env) is None


def test_open_mpi_layout():
    env = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    launch = detect_launch(env)
    assert (launch.launcher, launch.rank, launch.world_size, launch.local_rank) == ("mpirun", 2, 4, 0)


def test_torchrun_wins_over_slurm_inside_an_allocation():
    env = {"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"}
    assert detect_launch(env).launcher == "torchrun"


def test_bad_integer_names_the_variable():
    with pytest.raises(UserInputError) as info:
        detect_launch({"RANK": "x", "WORLD_SIZE": "2"})
    assert info.value.option == "RANK"


def test_backend_choice():
    assert choose_backend("auto", cuda_available=True) == "nccl"
    assert choose_backend("auto", cuda_available=False) == "gloo"
    assert choose_backend("gloo", cuda_available=True) == "gloo"
    with pytest.raises(UserInputError):
        choose_backend("nccl", cuda_available=False)


@pytest.mark.parametrize("env, option, message", [
    ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK", "2 is not a rank of a world of 2 (0 to 1)"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK", "-1 is not a rank of a world of 2 (0 to 1)"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE", "must be at least 1, got 0"),
    ({"SLURM_PROCID": "4", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0"}, "SLURM_PROCID",
     "4 is not a rank of a world of 4 (0 to 3)"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "abc"}, "MASTER_PORT",
     "expected a TCP port from 1 to 65535, got 'abc'"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "65536"}, "MASTER_PORT",
     "expected a TCP port from 1 to 65535, got '65536'"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "²"}, "MASTER_PORT",
     "expected a TCP port from 1 to 65535, got '²'"),
])
def test_a_layout_no_rendezvous_can_complete_is_refused(env, option, message):
    with pytest.raises(UserInputError) as info:
        detect_launch(env)
    assert (info.value.option, info.value.problem) == (option, message)


def test_a_valid_port_passes():
    assert detect_launch({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "29500"}).master_port == "29500"


def test_slurm_master_addr_defaults_to_the_steps_first_node():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NODELIST": "node[02-04]", "SLURM_JOB_NODELIST": "node[01-04]"}
    assert detect_launch(env).master_addr == "node02"  # the step's, not the job's: a step may use part of it
    assert detect_launch({**env, "MASTER_ADDR": "10.0.0.9"}).master_addr == "10.0.0.9"
    del env["SLURM_STEP_NODELIST"]
    assert detect_launch(env).master_addr == "node01"
