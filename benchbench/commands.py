"""One function per CLI verb. Each validates its input completely before it writes anything."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchbench import config, results
from benchbench.config import ConfigError, RunConfig
from benchbench.isolation import Cancelled, Isolator
from benchbench.probe import RunInputs
from benchbench.probe_configs import DatasetConfig
from benchbench.registry import Registry, default_registry
from benchbench.runner import EXIT_INTERRUPTED, Runner, StopFlag, default_out_dir, resolve_device


class UsageError(Exception):
    """Bad usage or input: one line on stderr, exit code 2, nothing written."""


def _names(text: str | None, registry: Registry, flag: str) -> tuple[str, ...]:
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
            {**registry.config_classes(), "dataset": DatasetConfig}, toml_data, args.set or [])
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    only = _names(args.only, registry, "--only") or _names(
        ",".join(file_run.get("only", ())), registry, "run.only")
    skip = _names(args.skip, registry, "--skip") or _names(
        ",".join(file_run.get("skip", ())), registry, "run.skip")
    device = args.device or file_run.get("device", "auto")
    if device not in config.DEVICES:
        raise UsageError(f"device {device!r}: choose from {', '.join(config.DEVICES)}")
    repeats = args.repeats if args.repeats is not None else file_run.get("repeats")
    if repeats is not None and repeats < 1:
        raise UsageError("--repeats must be at least 1")
    budget = args.time_budget if args.time_budget is not None else file_run.get("time_budget")
    if budget is not None and budget <= 0:
        raise UsageError("--time-budget must be a positive number of seconds")
    if only and not [n for n in only if n not in skip]:
        raise UsageError("--only and --skip leave no probe to run")
    return RunConfig(
        out=args.out, quick=bool(args.quick or file_run.get("quick", False)), only=only,
        skip=skip, device=device, label=args.label or file_run.get("label"), repeats=repeats,
        time_budget=budget, config_file=args.config, overrides=overrides,
        data_dir=args.data_dir, storage_path=args.storage_path,
    )


def _check_out_dir(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder")
        if any(out.iterdir()):
            raise UsageError(f"--out {out}: folder is not empty; a previous run is never "
                             "overwritten, choose a new folder")
    parent = out if out.exists() else next(p for p in out.absolute().parents if p.exists())
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: {parent} is not writable")


def _check_storage_path(cfg: RunConfig) -> None:
    if not cfg.storage_path:
        return
    from benchbench.storage_probes.probe import default_size, validate_storage_path

    size = cfg.overrides.get("storage", {}).get("size") or default_size(cfg.quick)
    try:
        validate_storage_path(cfg.storage_path, size)
    except ConfigError as exc:
        raise UsageError(f"--storage-path {cfg.storage_path}: {exc}") from None


def _dataset(cfg: RunConfig, registry: Registry) -> dict[str, Any] | None:
    """The dataset's facts: the user's --data-dir checked, or the synthetic one generated (or
    reused from the cache) when a selected probe reads data."""
    from benchbench import dataset

    if cfg.data_dir:
        try:
            return dataset.scan_imagefolder(cfg.data_dir)
        except dataset.DatasetError as exc:
            raise UsageError(f"--data-dir {cfg.data_dir}: {exc}") from None
    selected = [s for s in registry if (not cfg.only or s.name in cfg.only)
                and s.name not in cfg.skip]
    if not any(s.needs_data for s in selected):
        return None
    from benchbench.progress import task_progress

    ds_cfg = DatasetConfig(**cfg.overrides.get("dataset", {}))
    with task_progress("generating the synthetic dataset") as progress:
        try:
            return dataset.ensure_synthetic(ds_cfg, cfg.quick, progress=progress)
        except dataset.DatasetError as exc:  # e.g. a full disk or a read-only cache folder
            raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from benchbench import environment
    from benchbench.progress import RichDisplay
    from benchbench.reports import markdown

    registry = default_registry()
    cfg = build_run_config(args, registry)
    out = Path(cfg.out) if cfg.out else default_out_dir()
    _check_out_dir(out)
    _check_storage_path(cfg)
    data = _dataset(cfg, registry)  # before signals are taken over: Ctrl-C simply stops it
    stop = StopFlag()
    restore = stop.install()
    try:
        isolator = Isolator()
        try:
            got = isolator.call("benchbench.worker:collect_facts", None, timeout_s=300,
                                should_stop=stop)
        except Cancelled:
            print(f"benchbench: interrupted by {stop.signal_name}; nothing was run",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        facts: dict[str, Any] = got.value if got.ok else {
            "cuda_available": False, "cuda_device_count": 0, "gpus": [],
            "no_gpu_reason": f"reading the devices failed: {got.error}"}
        if resolve_device(cfg.device, facts) == "cuda" and not facts.get("cuda_available"):
            raise UsageError(f"--device cuda: no usable CUDA GPU here "
                             f"({facts.get('no_gpu_reason')})")
        try:
            runner = Runner(registry, cfg, out, sys.argv[:], facts, {}, isolator, stop=stop)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot create: {exc.strerror}") from None
        runner.run.environment = environment.snapshot(out, facts)
        if data is not None:
            runner.run.extra["dataset"] = data
        runner.inputs = RunInputs(run_dir=str(out), data_dir=data["path"] if data else None,
                                  dataset=data, storage_path=cfg.storage_path)
        with RichDisplay() as display:
            runner.display = display
            code = runner.execute()
    finally:
        restore()
    results.write_atomic(out / "report.md", markdown.render(runner.run))
    print(f"results: {runner.results_path}\nreport:  {out / 'report.md'}")
    if code == EXIT_INTERRUPTED:
        print(f"benchbench: interrupted by {stop.signal_name}; finished probes were kept",
              file=sys.stderr)
    return code


def report(args: argparse.Namespace) -> int:
    from benchbench.reports import markdown

    try:
        run_result = results.load(args.results)
    except results.ResultsError as exc:
        raise UsageError(str(exc)) from None
    src = Path(args.results)
    out = Path(args.out) if args.out else (src if src.is_dir() else src.parent)
    try:
        out.mkdir(parents=True, exist_ok=True)
        results.write_atomic(out / "report.md", markdown.render(run_result))
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write: {exc.strerror}") from None
    print(f"report: {out / 'report.md'}")
    return 0


def list_probes(args: argparse.Namespace) -> int:
    from benchbench.environment import torch_facts

    registry = default_registry()
    facts = torch_facts()
    device = "cuda" if facts.get("cuda_available") else "cpu"
    print(f"device here: {device}"
          + (f" ({facts.get('no_gpu_reason')})" if device == "cpu" else ""))
    for spec in registry:
        why = spec.skip_reason(device, facts.get("no_gpu_reason"))
        status = "would run" if why is None else f"skipped, because {why}"
        print(f"{spec.name:<18} {spec.resource(device):<17} {status}")
        print(f"{'':<18} {spec.description}")
        if args.fields:
            for name, default, doc in config.describe_fields(spec.config_cls,
                                                             spec.defaults(device, False)):
                print(f"{'':<20}{spec.name}.{name} = {default}  # {doc}")
    return 0


def env(args: argparse.Namespace) -> int:
    from benchbench.environment import snapshot, torch_facts
    from benchbench.reports.markdown import environment_section

    snap = snapshot(".", torch_facts())
    if args.json:
        print(json.dumps(snap, indent=1, default=str))
    else:
        print("\n".join(environment_section(snap)))
    return 0
