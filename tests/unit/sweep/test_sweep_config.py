from pathlib import Path

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.option_types import build_config
from nccl_bench.sweep import sweep_config as cfg

REPO = Path(__file__).resolve().parents[3]


def test_flags_win_over_preset_and_preset_over_defaults(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text('ops = ["broadcast"]\nwarmup = 9\ntrials = 2\nsizes = ["1K", "4K"]\n')
    config = build_config(cfg.SweepConfig, {"trials": 4, "dtype": None}, preset)
    assert config.ops == ("broadcast",)
    assert config.warmup == 9
    assert config.trials == 4
    assert config.sizes == (1024, 4096)
    assert config.dtype == "float32"


def test_preset_unknown_key_is_named(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("itres = 5\n")
    with pytest.raises(UserInputError) as info:
        build_config(cfg.SweepConfig, {}, preset)
    assert "itres" in str(info.value)


def test_preset_not_toml_is_one_clear_error(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("ops = [\n")
    with pytest.raises(UserInputError) as info:
        build_config(cfg.SweepConfig, {}, preset)
    assert info.value.option == "--config" and "not valid TOML" in info.value.problem


@pytest.mark.parametrize("name", ["quick", "full", "ci"])
def test_shipped_presets_load(name):
    config = build_config(cfg.SweepConfig, {}, REPO / "configs" / f"{name}.toml")
    assert config.ops


@pytest.mark.parametrize(
    "flags, option",
    [
        ({"min_bytes": "1M", "max_bytes": "1K"}, "--min-bytes"),
        ({"step_factor": 1.0}, "--step-factor"),
        ({"dtype": "float8"}, "--dtype"),
        ({"reduce_op": "avg", "dtype": "int32"}, "--reduce-op"),
        ({"iters": "0"}, "--iters"),
        ({"iters": "many"}, "--iters"),
        ({"sizes": "1K", "min_bytes": "8"}, "--sizes"),
        ({"agg": "median"}, "--agg"),
    ],
)
def test_invalid_combinations_name_the_option(flags, option):
    with pytest.raises(UserInputError) as info:
        build_config(cfg.SweepConfig, flags)
    assert info.value.option == option


def test_iters_auto_means_calibrate():
    assert build_config(cfg.SweepConfig, {"iters": "auto"}).iters is None
    assert build_config(cfg.SweepConfig, {"iters": "20"}).iters == 20


def test_host_default_ranges():
    config = build_config(cfg.SweepConfig, {})
    cpu = cfg.resolve_sizes(config, on_gpu=False)
    gpu = cfg.resolve_sizes(config, on_gpu=True)
    assert (cpu[0], cpu[-1], len(cpu)) == (1024, 64 * 2**20, 17)
    assert (gpu[0], gpu[-1], len(gpu)) == (8, 2**30, 28)


def test_max_below_cpu_default_min_still_gives_a_range():
    config = build_config(cfg.SweepConfig, {"max_bytes": "256"})
    assert cfg.resolve_sizes(config, on_gpu=False) == [256]


def test_every_config_key_names_an_option_of_the_sweep_command():
    import typer.main

    from nccl_bench.cli import app

    sweep = typer.main.get_command(app).commands["sweep"]
    options = {opt for param in sweep.params for opt in (*param.opts, *param.secondary_opts)}
    unknown = {key: cfg.option_name(key) for key in cfg.CONFIG_KEYS if cfg.option_name(key) not in options}
    assert not unknown, f"error messages would name options the sweep command lacks: {unknown}"


def test_errors_name_the_flag_not_the_field():
    with pytest.raises(UserInputError) as info:
        build_config(cfg.SweepConfig, {"timeout_s": 0})
    assert str(info.value) == "--timeout: must be greater than 0, got 0"
