"""nccl_bench: collective-communication bandwidth through torch.distributed, measured like nccl-tests."""

__version__ = "0.1.0"
