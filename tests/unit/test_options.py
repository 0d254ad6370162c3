"""Options declared once, as dataclass fields: a declaration's parser serves its flag and its preset key
alike, a violated bound names the option, and shared options are one declaration."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import typer.main

from nccl_bench import option_types, options
from nccl_bench.cli import option_sets
from nccl_bench.doctor import doctor_config
from nccl_bench.doctor.doctor_config import DoctorConfig
from nccl_bench.errors import UserInputError
from nccl_bench.option_types import build_config, declaration, declared, read_values
from nccl_bench.replay import replay_config
from nccl_bench.sweep import sweep_config as cfg
from nccl_bench.units import op_table
from nccl_bench.units.op_table import OP_NAMES
from nccl_bench.units.split_spec import Split

# A valid value for each sweep key, as a flag or a preset file would give it.
VALID = {
    "ops": "all_reduce,broadcast", "min_bytes": "1K", "max_bytes": "1M", "step_factor": 4, "step_bytes": "1K",
    "sizes": "1K,4K", "dtype": "FLOAT16", "reduce_op": "max", "root": 1, "alltoallv": "Skewed:2",
    "warmup": 0, "iters": "auto",
    "min_sample_ms": 10, "trials": 3, "agg": "min", "inplace": False, "check": True, "split": "MOD:2",
    "cycles": 0, "nccl_env": ["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=LL"], "nccl_trace": True, "backend": "gloo",
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
    "nccl_env": ("GLOO_X=1", "'GLOO_X' is not an NCCL variable"),
}


def test_expand_ops_handles_all_commas_repeats_and_dashes():
    assert options.expand_ops(["all"]) == OP_NAMES
    assert options.expand_ops(["all_reduce,all-gather", "all_reduce"]) == ("all_reduce", "all_gather")


def test_unknown_op_names_the_option():
    with pytest.raises(UserInputError) as info:
        options.expand_ops(["allreduce"])
    assert info.value.option == "--op" and "allreduce" in info.value.problem


def test_every_config_field_is_an_option():
    fields = dataclasses.fields(cfg.SweepConfig)
    assert cfg.CONFIG_KEYS == tuple(f.name for f in fields if f.name != "fields_from_flags")
    assert set(declared(DoctorConfig)) == {f.name for f in dataclasses.fields(DoctorConfig)}
    assert set(VALID) == set(cfg.CONFIG_KEYS)


def test_options_the_commands_share_are_one_declaration():
    shared = (options.BACKEND, options.OUT, options.RESULTS_ROOT, options.TIMEOUT)
    for option in shared:
        for config in (cfg.SweepConfig, DoctorConfig, replay_config.ReplayConfig):
            assert declaration(config, option.key) is option
    assert declaration(cfg.SweepConfig, "prom") is declaration(DoctorConfig, "prom") is options.PROM
    for key in ("warmup", "iters", "min_sample_ms", "trials"):  # the replay times collectives as the sweep does
        assert declaration(replay_config.ReplayConfig, key) is declaration(cfg.SweepConfig, key)


@pytest.mark.parametrize("key", sorted(VALID))
def test_a_preset_key_is_read_by_the_same_parser_as_its_flag(key):
    given = {key: VALID[key]}
    assert read_values(cfg.SweepConfig, given, source="p.toml") == read_values(cfg.SweepConfig, given)


@pytest.mark.parametrize("key", sorted(INVALID))
def test_a_bound_violated_names_the_flag_or_the_preset_key(key):
    value, problem = INVALID[key]
    flag = cfg.option_name(key)
    with pytest.raises(UserInputError) as from_flag:
        read_values(cfg.SweepConfig, {key: value})
    with pytest.raises(UserInputError) as from_preset:
        read_values(cfg.SweepConfig, {key: value}, source="p.toml")
    assert from_flag.value.option == flag and from_flag.value.problem.startswith(problem)
    assert from_preset.value.option == f"p.toml: {key}" and from_preset.value.problem == from_flag.value.problem


def test_an_option_is_named_by_its_long_flag():
    assert [cfg.option_name(key) for key in ("ops", "min_bytes", "timeout_s", "peak_gbps")] == [
        "--op", "--min-bytes", "--timeout", "--peak"]
    assert doctor_config.option_name("warmup") == "--warmup"


@pytest.mark.parametrize("option", [carried.item for carried in declared(DoctorConfig).values()],
                         ids=lambda option: option.key)
def test_the_doctors_help_states_its_configs_default(option):
    stated = re.search(r"\(default (\d+)\)", option.help)
    if stated:
        assert int(stated.group(1)) == getattr(DoctorConfig(), option.key)


def _declared(kind):
    """Every declaration of `kind`: the fields' of every options dataclass, and those not on a field."""
    modules = (options, option_sets, cfg, doctor_config, replay_config)
    found = [value for module in modules for value in vars(module).values() if isinstance(value, kind)]
    found += [carried.item for module in modules for value in vars(module).values()
              if dataclasses.is_dataclass(value) and isinstance(value, type)
              for carried in declared(value).values() if isinstance(carried.item, kind)]
    return sorted({id(value): value for value in found}.values(),
                  key=lambda value: (value.key, getattr(value, "flags", ())))


def _check_stated_defaults(option):
    """Each "(default ...)" of a help against the declaration: a value it spells is the declared default
    as shown; an option without one may only describe the choice made at run time, in words."""
    for before, colon, inside in re.findall(r"(\S+) \(default(?:(:)? ([^)]*))?\)", option.help):
        if option.default is None:
            assert inside and not re.search(r"\d", inside), f"{option.name}: a default the declaration lacks"
        elif not inside:  # "float32 (default)"
            assert before.strip("'") == option.shown, f"{option.name}'s help says the default is {before!r}"
        elif not colon:  # "(default 5)"
            assert inside == option.shown, f"{option.name}'s help says the default is {inside!r}"
        else:  # "(default: 256M on GPU, 4M on CPU)", "auto (default: nccl with CUDA, else gloo)"
            assert option.shown in (inside, before.strip("'")), f"{option.name}'s help says the default is {inside!r}"
    assert "{default}" not in option.help


@pytest.mark.parametrize("option", _declared(option_types.Option), ids=lambda option: option.name)
def test_every_default_a_help_states_is_the_declared_one(option):
    _check_stated_defaults(option)


@pytest.mark.parametrize("help_text, default, show", [
    ("Untimed ops (default 7).", 5, option_types.shown),
    ("Ops per sample (default 4).", None, option_types.shown),
    ("float16 (default), float32.", "float32", option_types.shown),
    ("Size (default: 256M on GPU, 4M on CPU).", option_types.PerDevice(256 << 20, 1 << 20), option_types.shown_size),
])
def test_a_help_that_spells_another_default_is_caught(help_text, default, show):
    with pytest.raises(AssertionError):
        declared = option_types.Option("key", ("--key",), option_types.text, help_text, default=default, show=show)
        _check_stated_defaults(declared)


def test_the_configs_start_from_the_declared_defaults():
    sweep, doctor = cfg.SweepConfig(), DoctorConfig()
    for config in (sweep, doctor):
        for option in (carried.item for carried in declared(type(config)).values()):
            value = getattr(config, option.key)
            if option.default is None or isinstance(option.default, option_types.PerDevice):
                assert value is None, option.key  # chosen at run time, as the help says
            elif value is not None or option.key != "step_factor":  # None: -f unless -i is given
                assert value == option.read_default(), option.key
    assert cfg.min_sample_ms(sweep, on_gpu=True) == 50.0 and cfg.min_sample_ms(sweep, on_gpu=False) == 200.0


def test_compares_defaults_are_the_declared_ones():
    """comparison.py keeps its rule's defaults for callers without a command line; they are the options'."""
    from nccl_bench import comparison

    assert (comparison.DEFAULT_TOLERANCE, comparison.DEFAULT_MIN_BYTES) == (
        options.TOLERANCE.read_default(), options.LATENCY_BELOW.read_default())


def test_options_several_commands_share_are_one_declaration_each():
    """compare's and sweep's --tolerance and --allow-mismatch, compare's and the doctor's --json FILE."""
    from nccl_bench.cli import app

    group = typer.main.get_command(app)

    def declared_help(command, flag):
        return next(param.help for param in group.commands[command].params if flag in param.opts)

    assert declared_help("compare", "--tolerance").startswith(options.TOLERANCE.help.split(",")[0])
    assert declared_help("sweep", "--tolerance").endswith(options.TOLERANCE.help.split(",", 1)[1])
    assert declared_help("sweep", "--allow-mismatch").lower().endswith(options.ALLOW_MISMATCH.help.lower())
    assert declared_help("compare", "--allow-mismatch") == options.ALLOW_MISMATCH.help
    assert declaration(DoctorConfig, "tolerance") is not options.TOLERANCE  # another default, another meaning
    assert declared_help("doctor", "--json").startswith("Also write") and declared_help("compare", "--json").endswith(
        "to FILE.")


def test_the_op_names_are_the_tables_and_each_has_its_torch_call():
    from nccl_bench.ranks.collectives import CALLS

    assert OP_NAMES == tuple(op_table.OPS) and set(CALLS) == set(OP_NAMES)
    assert {name for name in OP_NAMES if op_table.OPS[name].uneven} == {"all_to_allv"}
    assert [name for name in OP_NAMES if not op_table.moves_data(name)] == ["barrier"]


def test_the_split_is_read_once_into_its_value_and_written_as_text():
    config = build_config(cfg.SweepConfig, {"split": "MOD:2"})
    assert config.split == Split("mod", 2) and cfg.as_dict(config)["split"] == "mod:2"
    assert cfg.as_dict(build_config(cfg.SweepConfig, {}))["split"] is None


# Flags that messages outside the declaration modules still spell in their text: the layers below options.py
# (comparison, results/, units/) and other programs' flags (torchrun's --nproc, srun's --gpus-per-task).
MAX_SPELLED_FLAGS = 25
DECLARATION_MODULES = ("options.py", "option_sets.py", "sweep_config.py", "doctor_config.py", "replay_config.py")


def test_messages_name_flags_through_their_declarations():
    """A flag spelled as text outside the declaration modules is a message a rename would leave stale; the few
    left are counted (string constants, docstrings aside) so that the number can only fall."""
    import ast

    package = Path(options.__file__).parent
    flag = re.compile(r"--[a-z][a-z-]+")
    spelled = []
    for path in package.rglob("*.py"):
        if path.name in DECLARATION_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        spelled += [(path.name, node.lineno, found) for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    for found in flag.findall(node.value)]
    assert len(spelled) <= MAX_SPELLED_FLAGS, spelled
