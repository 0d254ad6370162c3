"""Entry point for `python -m nccl_bench` and `torchrun -m nccl_bench`."""

from nccl_bench.cli import program

if __name__ == "__main__":
    program()
