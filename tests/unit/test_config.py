import dataclasses

import pytest
from helpers import run_args

from benchbench.commands.common import UsageError, build_run_config
from benchbench.core import config
from benchbench.core.config import ConfigError
from benchbench.engine.catalog import default_registry
from benchbench.engine.runner import Runner
from benchbench.probes.host_device_copy.config import HostDeviceCopyConfig
from benchbench.probes.matmul.config import MatmulConfig


@pytest.mark.parametrize("text,expected", [
    ("4096", 4096), ("1K", 1024), ("64M", 64 << 20), ("1G", 1 << 30), ("2T", 2 << 40),
    ("16MiB", 16 << 20), ("8k", 8192), (123, 123),
])
def test_parse_size(text, expected):
    assert config.parse_size(text) == expected


@pytest.mark.parametrize("bad", ["1.5G", "G", "-1", "12X", True])
def test_parse_size_rejects(bad):
    with pytest.raises(ConfigError):
        config.parse_size(bad)


def test_parse_set():
    assert config.parse_set("matmul.sizes=1024,2048") == ("matmul", "sizes", "1024,2048")
    for bad in ["matmul", "matmul=3", ".x=1", "matmul.sizes"]:
        with pytest.raises(ConfigError, match="malformed"):
            config.parse_set(bad)


def test_convert_field_types():
    assert config.convert_field(MatmulConfig, "sizes", "1024, 2048", "matmul") == (1024, 2048)
    assert config.convert_field(MatmulConfig, "dtypes", "fp32,bf16", "matmul") == ("fp32", "bf16")
    assert config.convert_field(MatmulConfig, "sizes", "auto", "matmul") is None
    assert config.convert_field(HostDeviceCopyConfig, "sizes", "1M,1G", "h") == (1 << 20, 1 << 30)
    assert config.convert_field(HostDeviceCopyConfig, "concurrent", "off", "h") is False
    assert config.convert_field(MatmulConfig, "target_cv", "0.01", "matmul") == 0.01
    with pytest.raises(ConfigError, match="unknown config field matmul.size;"):
        config.convert_field(MatmulConfig, "size", "1", "matmul")
    with pytest.raises(ConfigError, match="expected an integer"):
        config.convert_field(MatmulConfig, "max_repeats", "many", "matmul")


def test_every_probe_field_is_settable():
    """Each field of each probe converts from its --set spelling back to its value."""
    for spec in default_registry():
        for f in dataclasses.fields(spec.config_cls):
            if f.metadata.get("search"):  # batch sizes: 'auto' asks for a search
                assert config.convert_field(spec.config_cls, f.name, "auto", spec.name) == "auto"
                assert config.convert_field(spec.config_cls, f.name, "32", spec.name) == 32
                continue
            if f.default is None:
                assert config.convert_field(spec.config_cls, f.name, "auto", spec.name) is None
                continue
            text = (",".join(map(str, f.default)) if isinstance(f.default, tuple)
                    else str(f.default))
            got = config.convert_field(spec.config_cls, f.name, text, spec.name)
            assert got == f.default, (spec.name, f.name)


def test_validation_of_values():
    with pytest.raises(ConfigError, match="dtypes: unknown fp4"):
        config.collect_overrides({"matmul": MatmulConfig}, {}, ["matmul.dtypes=fp4"])
    with pytest.raises(ConfigError, match="unknown probe"):
        config.collect_overrides({"matmul": MatmulConfig}, {}, ["nosuch.x=1"])


def test_precedence_defaults_quick_toml_set(tmp_path):
    registry = default_registry()
    toml = tmp_path / "c.toml"
    toml.write_text('[run]\nlabel = "from-file"\nrepeats = 4\n'
                    '[matmul]\nsizes = [128, 256]\ndtypes = ["fp32"]\n'
                    '[host_device_copy]\nsizes = ["1M", "4M"]\n')
    cfg = build_run_config(run_args(config=str(toml), quick=True,
                                 set=["matmul.sizes=64"], label="from-flag"), registry)
    assert cfg.label == "from-flag" and cfg.repeats == 4 and cfg.quick
    assert cfg.overrides["matmul"] == {"sizes": (64,), "dtypes": ("fp32",)}
    assert cfg.overrides["host_device_copy"]["sizes"] == (1 << 20, 4 << 20)
    runner = Runner(registry, cfg, tmp_path, [], {"cuda_available": False}, {}, isolator=None)
    mm = runner.configs["matmul"]
    assert mm.sizes == (64,)  # --set beats the file
    assert mm.dtypes == ("fp32",)  # the file beats the quick default
    assert mm.warmup_s == 0.1  # --quick default for the CPU, not overridden
    mb = runner.configs["memory_bandwidth"]
    # resolved before the probe runs: no cache size known here, so 4x the assumed 256M LLC
    assert mb.host_size_bytes == 1024**3


@pytest.mark.parametrize("kw,match", [
    (dict(only="matmul,bogus"), "unknown probe bogus; valid: matmul"),
    (dict(set=["matmul.sizes"]), "malformed --set"),
    (dict(set=["matmul.nope=1"]), "unknown config field matmul.nope"),
    (dict(repeats=0), "--repeats"),
    (dict(time_budget=-1.0), "--time-budget"),
    (dict(only="matmul", skip="matmul"), "no probe to run"),
    (dict(config="/nonexistent.toml"), "no such file"),
])
def test_bad_run_input(kw, match):
    with pytest.raises(UsageError, match=match):
        build_run_config(run_args(**kw), default_registry())


def test_bad_toml(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[run\n")
    with pytest.raises(UsageError, match="invalid TOML"):
        build_run_config(run_args(config=str(p)), default_registry())
    p.write_text("[run]\nspeed = 3\n")
    with pytest.raises(UsageError, match="unknown config field run.speed"):
        build_run_config(run_args(config=str(p)), default_registry())
