"""The doctor's configuration (doctor/doctor_config.py): phases, validation by the declared options,
the message size."""

from __future__ import annotations

import pytest

from nccl_bench.doctor.doctor_config import DoctorConfig, resolve_size
from nccl_bench.errors import UserInputError
from nccl_bench.option_types import build_config


def _config(**values):
    return build_config(DoctorConfig, values)


def test_phases():
    assert _config(phases=None).phases == ("nodes", "pairs")
    assert _config(phases=["pairs,nodes"]).phases == ("nodes", "pairs")
    assert _config(phases=["pairs", "pairs"]).phases == ("pairs",)
    with pytest.raises(UserInputError, match="--phase: unknown phase 'links'"):
        _config(phases=["links"])


def test_build_config_and_size():
    config = _config(size_bytes=1026, iters=None, quick=True)
    assert config.quick and config.iters == 4 and resolve_size(config, on_gpu=False) == 1024
    assert resolve_size(_config(), on_gpu=True) == 256 * 1024**2
    assert resolve_size(_config(), on_gpu=False) == 4 * 1024**2
    with pytest.raises(UserInputError, match="--samples: must be at least 1, got 0"):
        _config(samples=0)


@pytest.mark.parametrize("values, message", [
    ({"size_bytes": "2"}, "--size: must be at least 4 bytes (one float32), got 2"),
    ({"size_bytes": "1Q"}, "--size: expected a byte size like 8, 1K, 64M or 1G, got '1Q'"),
    ({"backend": "tcp"}, "--backend: 'tcp' is not one of auto, nccl, gloo, mpi, ucc"),
    ({"timeout_s": 0}, "--timeout: must be greater than 0, got 0"),
    ({"quick_rounds": 0}, "--quick-rounds: must be at least 1, got 0"),
    ({"tolerance": 1.5}, "--tolerance: must be a fraction from 0 up to 1, got 1.5"),
])
def test_every_value_is_checked_by_its_declared_option(values, message):
    with pytest.raises(UserInputError) as info:
        _config(**values)
    assert str(info.value) == message


def test_text_values_are_converted_as_on_the_command_line():
    config = _config(size_bytes="1M", backend="GLOO", phases=["pairs"], seed=-3, out="run")
    assert (config.size_bytes, config.backend, config.phases, config.seed) == (2**20, "gloo", ("pairs",), -3)
    assert str(config.out) == "run"
