"""Frozen configuration for a run and for each probe, from defaults, --quick, TOML and --set.

Precedence, weakest first: the dataclass defaults, the probe's device and --quick defaults, the
--config TOML file, then each --set probe.field=value. A field left at None means "auto": the
probe decides from the device it runs on, and records what it chose in its params.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.sampling import RepeatPolicy

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

# A --quick run on a CPU trains the real pipeline at this image size: at 224 px its first step,
# warm round and timed rounds of the workers take ~20 s of a 2-core VM, half the quick run. The
# resnet50 probe stays at 224 px, the default's size, so that quick and default agree on the
# compute capacity (workloads/_config.py sets it; the verdict names it).
CPU_QUICK_PIPELINE_SIZE = 64


class ConfigError(ValueError):
    """Bad configuration from the user: reported in one line with exit code 2."""


_IEC = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE | re.ASCII)


def parse_size(text: str | int) -> int:
    """'1G' -> 1073741824. Sizes are plain bytes or K/M/G/T in IEC units (1024)."""
    if isinstance(text, bool):
        raise ConfigError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(f"size must not be negative: {text}")
        return text
    m = _SIZE_RE.match(str(text))
    if not m or len(m.group(1)) > 30:  # 30 digits is already far beyond any disk
        raise ConfigError(f"not a size: {text!r} (use bytes or K/M/G/T, e.g. 64M)")
    return int(m.group(1)) * _IEC[m.group(2).upper()]


def check_choices(name: str, values: tuple[str, ...] | None, allowed: tuple[str, ...]) -> None:
    """Refuse an empty list or a value outside `allowed`, naming the field and the choices."""
    if values is None:
        return
    if not values:
        raise ConfigError(f"{name} must not be empty")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ConfigError(f"{name}: unknown {', '.join(bad)}; choose from {', '.join(allowed)}")


def check_positive(name: str, values: tuple[int, ...] | None) -> None:
    if values is not None and (not values or any(v <= 0 for v in values)):
        raise ConfigError(f"{name} must be a non-empty list of positive numbers")


def size_field(default: Any = None, doc: str = "") -> Any:
    return field(default=default, metadata={"size": True, "doc": doc})


def doc_field(default: Any = None, doc: str = "") -> Any:
    return field(default=default, metadata={"doc": doc})


# ---------------------------------------------------------------------------------------------
# Probe configurations. Every field can be set with --set <probe>.<field>=<value>.


@dataclass(frozen=True)
class ProbeConfig:
    """Fields shared by every probe: its warm-up."""

    warmup_steps: int = doc_field(1, "untimed calls or training steps before timing, at least")
    warmup_s: float | None = doc_field(
        None, "warm-up also lasts at least this many seconds (clocks ramp, caches fill); "
        "auto: 0.3-0.5 (0.1-0.2 with --quick)")

    def validate(self) -> None:
        if self.warmup_steps < 0:
            raise ConfigError("warmup_steps must not be negative")
        if self.warmup_s is not None and self.warmup_s < 0:
            raise ConfigError("warmup_s must not be negative")

    def repeat_policy(self, min_repeats: int) -> RepeatPolicy:
        return RepeatPolicy(min_repeats=min_repeats, max_repeats=min_repeats,
                            warmup_s=self.warmup_s or 0.0, warmup_steps=self.warmup_steps)


@dataclass(frozen=True)
class SamplingConfig(ProbeConfig):
    """A probe that times one operation repeatedly: how many samples, and how long each."""

    min_sample_s: float | None = doc_field(
        None, "each timed sample repeats the operation until it lasts this long (seconds)")
    max_repeats: int = doc_field(50, "most timed samples per measurement")
    target_cv: float = doc_field(
        0.02, "stop sampling once the coefficient of variation falls below this")

    def validate(self) -> None:
        super().validate()
        if self.max_repeats < 1:
            raise ConfigError("max_repeats must be at least 1")
        for name in ("min_sample_s", "target_cv"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ConfigError(f"{name} must not be negative")

    def repeat_policy(self, min_repeats: int) -> RepeatPolicy:
        return RepeatPolicy(min_repeats=min_repeats,
                            max_repeats=max(self.max_repeats, min_repeats),
                            target_cv=self.target_cv, warmup_s=self.warmup_s or 0.0,
                            warmup_steps=self.warmup_steps)


# ---------------------------------------------------------------------------------------------
# The run.

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class RunConfig:
    """Everything a `benchbench run` was asked to do, before any probe resolves its auto fields."""

    out: str | None = None
    quick: bool = False
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    device: str = "auto"
    label: str | None = None
    repeats: int | None = None  # fewest timed samples per measurement; auto: 5, 3 with --quick
    rounds: int | None = None  # passes of the repeatable probes; auto: 3, 2 with --quick
    time_budget: float | None = None  # seconds per probe; auto: see runner.probe_budgets
    config_file: str | None = None
    data_dir: str | None = None  # the user's ImageFolder dataset; None: generate one
    storage_path: str | None = None  # where the storage probe puts its scratch file
    # USD per hour for this machine (cloud price or the user's own); compare costs the run by it
    price_per_hour: float | None = None
    # probe name -> {field: value}, already parsed and type-checked against the probe's class
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


RUN_FILE_KEYS = {"quick": bool, "label": str, "repeats": int, "rounds": int,
                 "time_budget": float,
                 "device": str, "only": list, "skip": list, "price_per_hour": float}


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _convert_scalar(tp: Any, raw: Any, is_size: bool, where: str) -> Any:
    if is_size:
        return parse_size(raw)
    if tp is bool:
        if isinstance(raw, bool):
            return raw
        low = str(raw).strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true or false, got {raw!r}")
    if tp is int:
        if isinstance(raw, bool):
            raise ConfigError(f"{where}: expected an integer, got {raw!r}")
        try:
            return int(raw) if isinstance(raw, int) else int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{where}: expected an integer, got {raw!r}") from None
    if tp is float:
        try:
            value = float(raw)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{where}: expected a number, got {raw!r}") from None
        if not math.isfinite(value):  # nan passes every `< 0` check in validate()
            raise ConfigError(f"{where}: expected a finite number, got {raw!r}")
        return value
    return str(raw).strip()


def convert_field(cls: type, name: str, raw: Any, probe: str) -> Any:
    """Convert a raw value (a --set string or a TOML value) to the type of cls.<name>."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    where = f"{probe}.{name}"
    if name not in fields:
        raise ConfigError(f"unknown config field {where}; valid: {', '.join(sorted(fields))}")
    f = fields[name]
    tp = _unwrap_optional(typing.get_type_hints(cls)[name])
    is_size = bool(f.metadata.get("size"))
    if f.metadata.get("search"):  # batch sizes: an integer, or 'auto' for the largest that fits
        if isinstance(raw, str) and raw.strip().lower() == "auto":
            return "auto"
        return _convert_scalar(int, raw, False, where)
    if isinstance(raw, str) and raw.strip().lower() in ("auto", "none") and f.default is None:
        return None
    if typing.get_origin(tp) is tuple:
        (item_tp, *_rest) = typing.get_args(tp)
        items = raw if isinstance(raw, list) else [s for s in str(raw).split(",") if s.strip()]
        return tuple(_convert_scalar(item_tp, item, is_size, where) for item in items)
    return _convert_scalar(tp, raw, is_size, where)


def build_probe_config(cls: type, values: dict[str, Any], probe: str) -> ProbeConfig:
    """Instantiate and validate a probe config from already-converted values."""
    try:
        cfg = cls(**values)
    except TypeError as exc:
        raise ConfigError(f"{probe}: {exc}") from None
    try:
        cfg.validate()
    except ConfigError as exc:
        raise ConfigError(f"{probe}: {exc}") from None
    return cfg


def parse_set(item: str) -> tuple[str, str, str]:
    """'matmul.sizes=1024,2048' -> ('matmul', 'sizes', '1024,2048')."""
    m = re.match(r"^\s*([A-Za-z_][\w-]*)\.([A-Za-z_]\w*)\s*=(.*)$", item)
    if not m:
        raise ConfigError(f"malformed --set {item!r}; expected probe.field=value")
    return m.group(1), m.group(2), m.group(3).strip()


def read_toml(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:  # TOMLDecodeError, or a plain ValueError for a huge integer
        raise ConfigError(f"config file {path}: invalid TOML: "
                          f"{' '.join(str(exc).splitlines())}") from None


def collect_overrides(
    probe_classes: dict[str, type], toml_data: dict[str, Any], sets: list[str]
) -> dict[str, dict[str, Any]]:
    """Merge the TOML probe tables and --set items into typed overrides (--set wins)."""
    overrides: dict[str, dict[str, Any]] = {}

    def put(probe: str, name: str, raw: Any) -> None:
        if probe not in probe_classes:
            raise ConfigError(
                f"unknown probe {probe!r} in config; valid: {', '.join(sorted(probe_classes))}")
        overrides.setdefault(probe, {})[name] = convert_field(probe_classes[probe], name, raw,
                                                              probe)

    for probe, table in toml_data.items():
        if probe == "run":
            continue
        if not isinstance(table, dict):
            raise ConfigError(f"config file: [{probe}] must be a table")
        for name, raw in table.items():
            put(probe, name, raw)
    for item in sets:
        put(*parse_set(item))
    for probe, values in overrides.items():  # validate each probe's overrides as a whole
        build_probe_config(probe_classes[probe], values, probe)
    return overrides


def run_section(toml_data: dict[str, Any]) -> dict[str, Any]:
    """The [run] table of a config file, type-checked."""
    section = toml_data.get("run", {})
    if not isinstance(section, dict):
        raise ConfigError("config file: [run] must be a table")
    out: dict[str, Any] = {}
    for key, value in section.items():
        if key not in RUN_FILE_KEYS:
            raise ConfigError(
                f"unknown config field run.{key}; valid: {', '.join(sorted(RUN_FILE_KEYS))}")
        want: type = RUN_FILE_KEYS[key]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ConfigError(f"run.{key}: expected {want.__name__}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"run.{key}: expected a finite number, got {value!r}")
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ConfigError(f"run.{key}: expected a list of probe names, got {value!r}")
            value = tuple(value)
        out[key] = value
    return out


def describe_fields(cls: type, defaults: dict[str, Any] | None = None
                    ) -> list[tuple[str, str, str]]:
    """(name, default, doc) for every field, for `benchbench list --fields`. `defaults` are
    the device and --quick defaults that replace the dataclass's own."""
    rows = []
    for f in dataclasses.fields(cls):
        value = (defaults or {}).get(f.name, f.default)
        if isinstance(value, tuple):
            value = ",".join(map(str, value))
        text = ("device default" if f.metadata.get("search") else "auto") if value is None \
            else str(value)
        rows.append((f.name, text, f.metadata.get("doc", "")))
    return rows
