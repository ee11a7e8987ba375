"""What the verbs share: the usage error, the run's configuration from --config and the flags,
and the check that --out is a new, writable folder. Each verb's module validates its input
completely before it writes anything."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

from benchbench.analysis.config import AnalysisConfig
from benchbench.core import config
from benchbench.core.config import ConfigError, RunConfig
from benchbench.engine.catalog import Registry
from benchbench.probes._config import DatasetConfig


class UsageError(Exception):
    """Bad usage or input: one line on stderr, exit code 2, nothing written."""


def probe_names(text: str | None, registry: Registry, flag: str) -> tuple[str, ...]:
    if not text:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise UsageError(f"{flag}: unknown probe {', '.join(unknown)}; valid: "
                         f"{', '.join(registry.names())}")
    return names


def build_run_config(args: argparse.Namespace, registry: Registry) -> RunConfig:
    """--config and the flags, merged with the documented precedence, and checked."""
    try:
        toml_data = config.read_toml(args.config) if args.config else {}
        file_run = config.run_section(toml_data)
        overrides = config.collect_overrides(
            {**registry.config_classes(), "dataset": DatasetConfig, "analysis": AnalysisConfig},
            toml_data, args.set or [])
        if getattr(args, "workload", None):
            overrides.setdefault("analysis", {})["workload"] = args.workload
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    for flag, value in (("--out", args.out), ("--data-dir", args.data_dir),
                        ("--storage-path", args.storage_path)):
        if value is not None and not value.strip():  # most likely an unset shell variable
            raise UsageError(f"{flag} must not be empty")
    if args.only is not None and not probe_names(args.only, registry, "--only"):
        raise UsageError(f"--only: no probe named; valid: {', '.join(registry.names())}")
    only = probe_names(args.only, registry, "--only") or probe_names(
        ",".join(file_run.get("only", ())), registry, "run.only")
    skip = probe_names(args.skip, registry, "--skip") or probe_names(
        ",".join(file_run.get("skip", ())), registry, "run.skip")
    device = args.device or file_run.get("device", "auto")
    if device not in config.DEVICES:
        raise UsageError(f"device {device!r}: choose from {', '.join(config.DEVICES)}")
    repeats = args.repeats if args.repeats is not None else file_run.get("repeats")
    if repeats is not None and repeats < 1:
        raise UsageError("--repeats must be at least 1")
    rounds = getattr(args, "rounds", None)
    rounds = rounds if rounds is not None else file_run.get("rounds")
    if rounds is not None and not 1 <= rounds <= 10:
        raise UsageError("--rounds must be from 1 to 10")
    budget = args.time_budget if args.time_budget is not None else file_run.get("time_budget")
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise UsageError("--time-budget must be a positive number of seconds")
    price = getattr(args, "price_per_hour", None)
    price = price if price is not None else file_run.get("price_per_hour")
    if price is not None and not (math.isfinite(price) and price > 0):
        raise UsageError("--price-per-hour must be a positive number of US dollars per hour")
    if only and not [n for n in only if n not in skip]:
        raise UsageError("--only and --skip leave no probe to run")
    return RunConfig(
        out=args.out, quick=bool(args.quick or file_run.get("quick", False)), only=only,
        skip=skip, device=device, label=args.label or file_run.get("label"), repeats=repeats,
        rounds=rounds,
        time_budget=budget, config_file=args.config, overrides=overrides,
        data_dir=args.data_dir, storage_path=args.storage_path, price_per_hour=price,
    )


def check_out_dir(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder")
        if any(out.iterdir()):
            raise UsageError(f"--out {out}: folder is not empty; a previous run is never "
                             "overwritten, choose a new folder")
    parent = out if out.exists() else next(p for p in out.absolute().parents if p.exists())
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: {parent} is not writable")
    # Root passes os.access everywhere, but /proc, /sys and some mounts still refuse: try it,
    # on --out's own path only (made and removed again, so a refusal leaves nothing).
    made = [] if out.exists() else [out, *[p for p in out.absolute().parents
                                           if not p.exists()]]
    try:
        if made:
            out.mkdir(parents=True)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".benchbench-check-", dir=out))
    except OSError:
        raise UsageError(f"--out {out}: {parent} is not writable") from None
    finally:
        for p in made:  # innermost first
            try:
                p.rmdir()
            except OSError:
                break


