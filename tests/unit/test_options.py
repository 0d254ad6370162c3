"""Options declared once (options.py): a declaration's parser serves its flag and its preset key alike,
a violated bound names the option, and shared options are one declaration."""

from __future__ import annotations

import dataclasses
import re

import pytest

from nccl_bench import config as cfg
from nccl_bench import options
from nccl_bench.doctor.config import DoctorConfig
from nccl_bench.errors import UserInputError
from nccl_bench.ranks.collectives import OP_NAMES

# A valid value for each sweep key, as a flag or a preset file would give it.
VALID = {
    "ops": "all_reduce,broadcast", "min_bytes": "1K", "max_bytes": "1M", "step_factor": 4, "step_bytes": "1K",
    "sizes": "1K,4K", "dtype": "FLOAT16", "reduce_op": "max", "root": 1, "alltoallv": "Skewed:2",
    "warmup": 0, "iters": "auto",
    "min_sample_ms": 10, "trials": 3, "agg": "min", "inplace": False, "check": True, "split": "MOD:2",
    "cycles": 0, "backend": "gloo",
    "out": "run", "results_root": "results", "timeout_s": 5, "cuda_graph": 2, "blocking": True, "peak_gbps": 100,
    "min_busbw_gbps": "12.5", "prom": "metrics.prom",
}
# A value breaking each key's bound or grammar, and what the error says after the option.
INVALID = {
    "ops": ("allreduce2", "unknown collective 'allreduce2'"), "min_bytes": ("1Q", "expected a byte size"),
    "step_factor": (1, "must be greater than 1, got 1"), "sizes": ("", "no sizes given"),
    "dtype": ("float8", "'float8' is not one of"), "root": (-1, "must be at least 0, got -1"),
    "warmup": (10**7, "must be at most 1,000,000, got 10,000,000"), "iters": (0, "must be at least 1, got 0"),
    "trials": (1001, "must be at most 1,000, got 1,001"), "timeout_s": (0, "must be greater than 0, got 0"),
    "cuda_graph": ("x", "expected a whole number, got 'x'"), "inplace": ("yes", "expected true or false, got 'yes'"),
    "peak_gbps": ("fast", "expected a number, got 'fast'"), "min_busbw_gbps": (0, "must be greater than 0, got 0"),
    "cycles": (-1, "must be at least 0, got -1"), "split": ("mod", "mod needs a whole number, as in mod:8"),
    "alltoallv": ("zipf", "'zipf' is not one of even, random[:SEED], skewed[:HOT]"),
}


def test_expand_ops_handles_all_commas_repeats_and_dashes():
    assert options.expand_ops(["all"]) == OP_NAMES
    assert options.expand_ops(["all_reduce,all-gather", "all_reduce"]) == ("all_reduce", "all_gather")


def test_unknown_op_names_the_option():
    with pytest.raises(UserInputError) as info:
        options.expand_ops(["allreduce"])
    assert info.value.option == "--op" and "allreduce" in info.value.problem


def test_every_config_field_has_one_declaration_in_field_order():
    assert tuple(option.key for option in options.SWEEP_OPTIONS) == cfg.CONFIG_KEYS
    assert {option.key for option in options.DOCTOR_OPTIONS} == {f.name for f in dataclasses.fields(DoctorConfig)}
    assert set(VALID) == set(cfg.CONFIG_KEYS)


def test_options_the_commands_share_are_one_declaration():
    shared = (options.BACKEND, options.OUT, options.RESULTS_ROOT, options.TIMEOUT, options.PROM)
    for option in shared:
        assert options.SWEEP_OPTION[option.key] is option and options.DOCTOR_OPTION[option.key] is option


@pytest.mark.parametrize("key", sorted(VALID))
def test_a_preset_key_is_read_by_the_same_parser_as_its_flag(key):
    assert cfg.normalize({key: VALID[key]}, source="p.toml") == cfg.normalize({key: VALID[key]})


@pytest.mark.parametrize("key", sorted(INVALID))
def test_a_bound_violated_names_the_flag_or_the_preset_key(key):
    value, problem = INVALID[key]
    flag = options.SWEEP_OPTION[key].name
    with pytest.raises(UserInputError) as from_flag:
        cfg.normalize({key: value})
    with pytest.raises(UserInputError) as from_preset:
        cfg.normalize({key: value}, source="p.toml")
    assert from_flag.value.option == flag and from_flag.value.problem.startswith(problem)
    assert from_preset.value.option == f"p.toml: {key}" and from_preset.value.problem == from_flag.value.problem


def test_an_option_is_named_by_its_long_flag():
    assert [options.SWEEP_OPTION[key].name for key in ("ops", "min_bytes", "timeout_s", "peak_gbps")] == [
        "--op", "--min-bytes", "--timeout", "--peak"]
    assert options.DOCTOR_OPTION["warmup"].name == "--warmup"


@pytest.mark.parametrize("option", options.DOCTOR_OPTIONS, ids=lambda option: option.key)
def test_the_doctors_help_states_its_configs_default(option):
    stated = re.search(r"\(default (\d+)\)", option.help)
    if stated:
        assert int(stated.group(1)) == getattr(DoctorConfig(), option.key)
