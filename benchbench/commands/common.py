"""One function per CLI verb. Each validates its input completely before it writes anything."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import stat
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from benchbench.analysis.config import AnalysisConfig
from benchbench.core import config, results
from benchbench.core.config import ConfigError, RunConfig
from benchbench.engine import launch, multinode
from benchbench.engine.isolation import Cancelled, Isolator
from benchbench.engine.launch import DistEnv
from benchbench.engine.runner import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Phases,
    Runner,
    SilentDisplay,
    StopFlag,
    default_out_dir,
    resolve_device,
    selected_specs,
)
from benchbench.probes.catalog import Registry, default_registry
from benchbench.probes.dataset import DatasetConfig


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
    if args.only is not None and not _names(args.only, registry, "--only"):
        raise UsageError(f"--only: no probe named; valid: {', '.join(registry.names())}")
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


def _check_storage_path(cfg: RunConfig) -> None:
    raw = cfg.overrides.get("storage", {}).get("raw_device")
    if raw:
        try:
            is_block = stat.S_ISBLK(os.stat(raw).st_mode)
        except FileNotFoundError:
            raise UsageError(f"storage.raw_device {raw}: no such file") from None
        except OSError as exc:
            raise UsageError(f"storage.raw_device {raw}: {exc.strerror}") from None
        if not is_block:
            raise UsageError(f"storage.raw_device {raw}: not a block device")
    if not cfg.storage_path:
        return
    if raw and os.path.realpath(cfg.storage_path) == os.path.realpath(raw):
        return  # the opt-in: the probe reads this device, read-only
    from benchbench.probes.storage.config import SPEC as STORAGE
    from benchbench.probes.storage.run import validate_storage_path

    try:  # the size the probe will write: its default for --quick, or the user's
        size = STORAGE.resolve("cpu", cfg.quick, {}, cfg.overrides.get("storage", {})).size
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    try:
        validate_storage_path(cfg.storage_path, size)
    except ConfigError as exc:
        raise UsageError(f"--storage-path {cfg.storage_path}: {exc}") from None


def _dataset(cfg: RunConfig, specs: list[Any]) -> dict[str, Any] | None:
    """The dataset's facts: the user's --data-dir checked, or the synthetic one generated (or
    reused from the cache) when a selected probe reads data."""
    from benchbench.probes import dataset

    if cfg.data_dir:
        try:
            return dataset.scan_imagefolder(cfg.data_dir)
        except dataset.DatasetError as exc:
            raise UsageError(f"--data-dir {cfg.data_dir}: {exc}") from None
    if not any(s.needs_data for s in specs):
        return None
    from benchbench.engine.progress import task_progress

    ds_cfg = DatasetConfig(**cfg.overrides.get("dataset", {}))
    with task_progress("generating the synthetic dataset") as progress:
        try:
            return dataset.ensure_synthetic(ds_cfg, cfg.quick, progress=progress)
        except dataset.DatasetError as exc:  # e.g. a full disk or a read-only cache folder
            raise UsageError(str(exc)) from None


def _launched() -> DistEnv | None:
    try:
        return launch.from_environ()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _prepare(args: argparse.Namespace, registry: Registry, launched: DistEnv | None
             ) -> tuple[RunConfig, Path, dict[str, Any] | None]:
    """Everything checked before anything is written: config, --out, storage path, dataset."""
    cfg = build_run_config(args, registry)
    out = Path(cfg.out) if cfg.out else default_out_dir()
    if launched is None or launched.is_master:
        _check_out_dir(out)
    else:  # only rank 0 writes the run folder; this rank keeps its scratch in a temp folder
        out = Path(tempfile.mkdtemp(prefix=f"benchbench-rank{launched.rank}-"))
    _check_storage_path(cfg)
    data = _dataset(cfg, selected_specs(registry, cfg, launched)) \
        if cfg.data_dir or launched else None
    return cfg, out, data


def _refuse_silent_cpu_fallback(cfg: RunConfig, facts: dict[str, Any]) -> None:
    """--device auto on a machine whose GPUs torch cannot use (a wheel built for a newer
    driver, say) would measure the CPU and call it the machine: refuse instead, naming both
    facts. --device cpu stays the way to measure the CPU on purpose."""
    if cfg.device != "auto" or facts.get("cuda_available"):
        return
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return  # the GPUs were hidden on purpose
    from benchbench.machine import environment

    names = environment.nvml_gpu_names()
    if not names:
        return
    models = ", ".join(sorted(set(names)))
    raise UsageError(f"NVML sees {len(names)} GPU(s) ({models}) but torch cannot use them: "
                     f"{facts.get('no_gpu_reason') or 'CUDA is unavailable'}; fix the driver "
                     "or the torch build, or pass --device cpu to measure the CPU on purpose")


def _facts(isolator: Isolator, stop: StopFlag) -> dict[str, Any]:
    got = isolator.call("benchbench.engine.worker:collect_facts", None, timeout_s=300,
                        should_stop=stop)
    if got.ok:
        return dict(got.value)
    from benchbench.machine.environment import usable_cores

    return {"cuda_available": False, "cuda_device_count": 0, "gpus": [],
            "usable_cores": usable_cores(),
            "no_gpu_reason": f"reading the devices failed: {got.error}"}


def run(args: argparse.Namespace) -> int:
    from benchbench.engine.progress import RichDisplay
    from benchbench.machine import environment

    phases = Phases(getattr(args, "started", None))
    registry = default_registry()
    launched = _launched()
    isolator = Isolator() if launched else None
    try:
        cfg, out, data = _prepare(args, registry, launched)
    except UsageError as exc:
        if launched and isolator:  # tell the other ranks why, so they do not wait for us
            try:
                multinode.start_together(isolator, launched, str(exc))
            except multinode.RankError:
                pass  # our own input error is the message that matters here
        raise
    stop = StopFlag()
    restore = stop.install()
    scratch = out if launched and not launched.is_master else None
    try:
        isolator = isolator or Isolator()
        ranks_here: set[int] = set()
        if launched:
            try:
                ranks_here = multinode.start_together(isolator, launched, None)
            except multinode.RankError as exc:
                raise UsageError(str(exc)) from None
        phases.mark("checks")
        try:
            facts = _facts(isolator, stop)
            phases.mark("worker start-up and torch facts")
        except Cancelled:
            print(f"benchbench: interrupted by {stop.signal_name}; nothing was run",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        if resolve_device(cfg.device, facts) == "cuda" and not facts.get("cuda_available"):
            raise UsageError(f"--device cuda: no usable CUDA GPU here "
                             f"({facts.get('no_gpu_reason')})")
        _refuse_silent_cpu_fallback(cfg, facts)
        try:
            runner = Runner(registry, cfg, out, sys.argv[:], facts, {}, isolator, stop=stop,
                            launched=launched)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        if data is None and launched is None:  # generated once nothing can refuse the run
            restore()  # while it generates, Ctrl-C simply stops it (KeyboardInterrupt)
            data = _dataset(cfg, runner.selected())
            restore = stop.install()
            phases.mark("dataset")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot create: {exc.strerror}") from None
        if launched is None or launched.is_node_leader:
            runner.run.environment = environment.snapshot(out, facts, own=ranks_here)
        else:
            runner.run.environment = {"host": environment.host_snapshot()}
        phases.mark("environment snapshot")
        if data is not None:
            runner.run.extra["dataset"] = data
        runner.inputs = dataclasses.replace(
            runner.inputs, data_dir=data["path"] if data else None, dataset=data,
            storage_path=cfg.storage_path)
        with (RichDisplay() if runner.writes else nullcontext(SilentDisplay())) as display:
            runner.display = display
            code = runner.execute()
        phases.mark("probes")
        if launched:
            code = _gather(isolator, launched, runner, registry, code)
            if not launched.is_master:
                return code
    finally:
        restore()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    written = write_reports(runner.run, out, cfg.overrides.get("analysis", {}).get("workload"))
    phases.mark("reports")
    runner.run.extra["timings"] = dict(phases.spent)
    runner.save()
    print(f"results: {runner.results_path}\n" + "\n".join(f"report:  {p}" for p in written))
    print(f"benchbench: {phases.summary()}", file=sys.stderr)
    if code == EXIT_INTERRUPTED:
        print(f"benchbench: interrupted by {stop.signal_name}; finished probes were kept",
              file=sys.stderr)
    return code


def _gather(isolator: Isolator, launched: DistEnv, runner: Runner, registry: Registry,
            code: int) -> int:
    """Send this rank's results to rank 0; on rank 0, merge them into the run and save it.
    Other ranks exit 0 once their results are sent (srun --kill-on-bad-exit would otherwise
    stop rank 0 before it writes): rank 0's exit code speaks for the run."""
    # Rank 0 waits for the slowest node: its per-node probes may run to their hard limits.
    timeout = runner.worst_case_s() + 300
    try:
        reports = multinode.gather(isolator, launched, runner.run, timeout)
    except multinode.RankError as exc:
        print(f"benchbench: {exc}", file=sys.stderr)
        return EXIT_FAILED if code == EXIT_OK else code
    if not launched.is_master:
        print(f"benchbench: rank {launched.rank}: results sent to rank 0 "
              f"({launched.master_addr})", file=sys.stderr)
        return EXIT_INTERRUPTED if code == EXIT_INTERRUPTED else EXIT_OK
    multinode.merge(runner.run, launched, reports or [],
                    {s.name for s in registry if s.distributed})
    runner.analyse()
    runner.save()
    elsewhere = multinode.failed_elsewhere(reports or [])
    for line in elsewhere:
        print(f"benchbench: failed on {line}", file=sys.stderr)
    return EXIT_FAILED if elsewhere and code == EXIT_OK else code


def report(args: argparse.Namespace) -> int:
    try:
        run_result = results.load(args.results)
    except results.ResultsError as exc:
        raise UsageError(str(exc)) from None
    src = Path(args.results)
    home = src if src.is_dir() else src.parent
    out = Path(args.out) if args.out else home
    if out.resolve() != home.resolve():  # in place re-renders; elsewhere, never over a run
        _check_out_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = write_reports(run_result, out, args.workload)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write: {exc.strerror}") from None
    print("\n".join(f"report: {p}" for p in written))
    return 0


def write_reports(run: Any, out: Path, workload: str | None) -> list[Path]:
    """report.md, report.html, measurements.csv and the plots, with the verdict recomputed
    from the measurements (the one stored in results.json is only a cache)."""
    from benchbench.analysis import verdict
    from benchbench.reports import doctor, markdown, outputs

    v = verdict.verdict(run, workload)
    md = markdown.render(run, workload)
    results.write_atomic(out / "report.md", md)
    return [out / "report.md",
            *outputs.write_all(run, out, v, doctor.section(run), markdown_text=md)]


def list_probes(args: argparse.Namespace) -> int:
    from benchbench.machine.environment import torch_facts

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
            for name, default, doc in config.describe_fields(
                    spec.config_cls, spec.defaults(device, False, facts)):
                print(f"{'':<20}{spec.name}.{name} = {default}  # {doc}")
    return 0


def env(args: argparse.Namespace) -> int:
    from benchbench.machine.environment import snapshot, torch_facts
    from benchbench.reports.markdown import environment_section

    snap = snapshot(".", torch_facts())
    if args.json:
        print(json.dumps(snap, indent=1, default=str))
    else:
        print("\n".join(environment_section(snap)))
    return 0


def slurm(args: argparse.Namespace) -> int:
    from benchbench.engine.slurm import SlurmError, sbatch_script

    try:
        script = sbatch_script(args.nodes, args.gpus_per_node, partition=args.partition,
                               time=args.time, account=args.account, out=args.out,
                               run_args=args.run_args)
    except SlurmError as exc:
        raise UsageError(str(exc)) from None
    run_args = args.parse_run_args(args.run_args)
    if run_args.out is not None:
        raise UsageError("give the run folder as `benchbench slurm --out DIR`, before --")
    build_run_config(run_args, default_registry())  # now, not after the job has queued
    print(script, end="")
    return 0


def doctor(args: argparse.Namespace) -> int:
    """Read-only checks of this machine now, or of a saved run (its environment and
    measurements). Exit 1 when a check fails; warnings alone exit 0."""
    from benchbench.doctor import checks as rules
    from benchbench.reports import doctor as doctor_report

    run_result = None
    if args.results:
        try:
            run_result = results.load(args.results)
        except results.ResultsError as exc:
            raise UsageError(str(exc)) from None
        snap = run_result.environment
        if not isinstance(snap, dict):
            raise UsageError(f"{args.results}: its environment is not a JSON object")
    else:
        from benchbench.machine.environment import snapshot, torch_facts

        snap = snapshot(".", torch_facts())
        for g in snap["gpus"]:  # should torch_facts() have made a CUDA context, NVML lists us
            if "other_processes" in g:
                g["other_processes"] = [p for p in g["other_processes"]
                                        if p.get("pid") != os.getpid()]
    checks = rules.run_checks(snap, run_result, args.scenario)
    if args.json:
        print(json.dumps({"results": args.results, "scenario": args.scenario,
                          "summary": rules.counts(checks),
                          "checks": [dataclasses.asdict(c) for c in checks]}, indent=1))
    else:
        where = f"the run in {args.results}" if args.results else "this machine"
        print(f"# Configuration doctor: {where}\n")
        print("\n".join(doctor_report.table(checks)))
        print(f"{doctor_report.summary(checks)}. Read-only: nothing was changed.")
    return EXIT_FAILED if rules.failed(checks) else EXIT_OK


EXIT_REGRESSION = 3  # compare: at least one measurement regressed


def compare(args: argparse.Namespace) -> int:
    """Runs side by side with regression decisions (exit 3 when one regressed), their verdicts,
    environments and costs: Markdown on stdout; compare.md/.html/.csv only under --out."""
    import math
    import time

    from benchbench.analysis import cost
    from benchbench.compare import cost as compare_cost
    from benchbench.compare import sides as cmp
    from benchbench.reports import compare_html, compare_md, compare_plots

    started = time.perf_counter()

    def check(name: str, value: float | None, ok: bool, what: str) -> None:
        if value is not None and not (math.isfinite(value) and ok):
            raise UsageError(f"{name} {value:g}: must be {what}")

    check("--threshold", args.threshold, args.threshold >= 0, "a percentage, 0 or more")
    check("--alpha", args.alpha, 0 < args.alpha < 1, "above 0 and below 1")
    check("--utilization", args.utilization, 0 < args.utilization <= 1,
          "a fraction above 0 and at most 1")
    check("--years", args.years, args.years > 0, "positive")
    check("--usd-per-kwh", args.usd_per_kwh, args.usd_per_kwh >= 0, "0 or more")
    check("--ops-usd-per-year", args.ops_usd_per_year, args.ops_usd_per_year >= 0, "0 or more")
    check("--power-watts", args.power_watts, (args.power_watts or 0) > 0, "positive")
    if args.tokens is not None and args.tokens <= 0:
        raise UsageError(f"--tokens {args.tokens}: must be a positive number of tokens")
    try:
        prices = compare_cost.parse_assignments(args.price, "--price")
        buys = compare_cost.parse_assignments(args.buy, "--buy")
        out = Path(args.out) if args.out else None
        if out is not None:
            _check_out_dir(out)
        sides = cmp.make_sides(args.runs, args.baseline or [])
        comp = cmp.compare(sides, threshold_pct=args.threshold, alpha=args.alpha,
                           workload=args.workload)
        if prices or buys or any(cost.price_of(r) is not None
                                 for s in sides for r in s.runs):
            extra = {"job_tokens": args.tokens} if args.tokens else {}
            comp.cost = compare_cost.section(
                comp, prices, buy=buys, power_watts=args.power_watts,
                usd_per_kwh=args.usd_per_kwh, years=args.years,
                ops_usd_per_year=args.ops_usd_per_year, utilization=args.utilization, **extra)
    except cmp.CompareError as exc:
        raise UsageError(str(exc)) from None
    md = compare_md.render(comp)
    md = md if md.endswith("\n") else md + "\n"
    print(md, end="")
    if out is not None:
        notes: list[str] = []
        figures = compare_plots.make(comp, notes)
        try:
            out.mkdir(parents=True, exist_ok=True)
            results.write_atomic(out / "compare.md", md)
            results.write_atomic(out / "compare.html",
                                 compare_html.render(comp, md, figures, notes))
            compare_md.write_csv(comp, out / "compare.csv")
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write: {exc.strerror}") from None
        for name in ("compare.md", "compare.html", "compare.csv"):
            print(f"written: {out / name}", file=sys.stderr)
    print(f"compared {sum(len(s.runs) for s in comp.sides)} run(s) in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return EXIT_REGRESSION if comp.regressed else EXIT_OK
