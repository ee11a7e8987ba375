"""`benchbench run`: check everything, then measure every selected probe in isolated workers,
save results.json after each, and write the reports once, from one verdict."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import stat
import sys
import tempfile
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from benchbench.commands import summary
from benchbench.commands.common import UsageError, build_run_config, check_out_dir
from benchbench.commands.report import write_reports
from benchbench.core import interruption
from benchbench.core.config import ConfigError, RunConfig
from benchbench.core.names import counted
from benchbench.engine import launch, multinode
from benchbench.engine.catalog import Registry, default_registry
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
    resolve_configs,
    resolve_device,
    selected_specs,
)
from benchbench.probes._config import DatasetConfig

# What the analysis and the reports import after the last probe (scipy.stats, pandas,
# matplotlib: ~2 s on two cores). They are imported while the forkserver imports torch, when
# this process would wait idle on one core, and the import is over before the first probe,
# so that nothing runs beside a measurement.
REPORT_MODULES = ("scipy.stats", "pandas", "matplotlib.figure",
                  "matplotlib.backends.backend_agg", "matplotlib.ticker")


def _import_early(modules: tuple[str, ...] = REPORT_MODULES) -> threading.Thread:
    """Import `modules` on a thread; join it before the first probe. One that fails to import
    is left for its real import to report."""

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the reports' own import says what is wrong
                pass

    thread = threading.Thread(target=load, name="benchbench-imports", daemon=True)
    thread.start()
    return thread


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
    from benchbench.storage_probes.storage.config import SPEC as STORAGE
    from benchbench.storage_probes.storage.run import validate_storage_path

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
        check_out_dir(out)
    else:  # only rank 0 writes the run folder; this rank keeps its scratch in a temp folder
        out = Path(tempfile.mkdtemp(prefix=f"benchbench-rank{launched.rank}-"))
    _check_storage_path(cfg)
    _check_cache()
    data = _dataset(cfg, selected_specs(registry, cfg, launched)) \
        if cfg.data_dir or launched else None
    return cfg, out, data


def _check_cache() -> None:
    """The cache folder (the synthetic dataset, the libraries' caches, the worker processes'
    start-up) can be created and written, or one line says which folder and how to fix it."""
    from benchbench.probes.dataset import cache_root

    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".benchbench-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"the cache folder {root} cannot be written: "
                         f"{exc.strerror or exc}; set BENCHBENCH_CACHE to a writable folder "
                         "(it holds the synthetic dataset and the libraries' caches)") from None


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
    raise UsageError(f"NVML sees {counted(len(names), 'GPU')} ({models}) but torch cannot use "
                     f"{'it' if len(names) == 1 else 'them'}: "
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


def main(args: argparse.Namespace) -> int:
    from benchbench.engine.progress import RichDisplay

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
        early = _import_early()
        try:
            facts = _facts(isolator, stop)
            early.join()
            phases.mark("worker start-up and torch facts")
        except Cancelled:
            print(f"benchbench: interrupted by {stop.signal_name}; nothing was run",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        device = resolve_device(cfg.device, facts)  # the one place the device is decided
        if device == "cuda" and not facts.get("cuda_available"):
            raise UsageError(f"--device cuda: no usable CUDA GPU here "
                             f"({facts.get('no_gpu_reason')})")
        _refuse_silent_cpu_fallback(cfg, facts)
        try:
            configs = resolve_configs(registry, cfg, device, facts, launched)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        if data is None and launched is None:  # generated once nothing can refuse the run
            restore()  # while it generates, Ctrl-C simply stops it (KeyboardInterrupt)
            data = _dataset(cfg, selected_specs(registry, cfg))
            restore = stop.install()
            phases.mark("dataset")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot create: {exc.strerror}") from None
        environment = _environment(out, facts, launched, ranks_here)
        phases.mark("environment snapshot")
        writes = launched is None or launched.is_master
        with (RichDisplay() if writes else nullcontext(SilentDisplay())) as display:
            runner = Runner(registry, cfg, out, sys.argv[:], facts, environment, isolator,
                            device=device, configs=configs, dataset=data, display=display,
                            stop=stop, launched=launched,
                            process_start=phases.t0 - phases.spent.get("python start-up", 0.0))
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
    assert runner.verdict is not None  # execute() and _gather() analysed the run
    restore = stop.deferring("the reports")  # a signal now would leave one half written
    try:
        written = write_reports(runner.run, out, runner.verdict)
        phases.mark("reports")
        runner.run.extra["timings"] = dict(phases.spent)
        runner.save()
    except OSError as exc:  # a full disk, a quota: results.json was saved after every probe
        raise UsageError(f"--out {out}: cannot write the reports ({exc.filename or out}: "
                         f"{exc.strerror or exc}); every measurement is kept in "
                         f"{runner.results_path}: free some space and re-render them with "
                         f"benchbench report {out}") from None
    finally:
        restore()
    # The terminal ends with the answer; the timing breakdown is in results.json ("timings").
    summary.show(summary.summary(runner.verdict, written, runner.results_path,
                                 interruption.of(runner.run)))
    from benchbench.reports.markdown import pacing_note  # loaded by the reports already

    if paced := pacing_note(runner.run):
        print(f"benchbench: {paced}", file=sys.stderr)
    if getattr(args, "verbose", False):
        print(f"benchbench: {phases.summary()}", file=sys.stderr)
    if code == EXIT_INTERRUPTED:
        print(f"benchbench: interrupted by {stop.signal_name}; finished probes were kept",
              file=sys.stderr)
    elif stop.late:  # every probe ran: the run is whole, but the caller asked to stop
        print(f"benchbench: {stop.late} came as the reports were written; every probe had "
              f"run and the reports were finished", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


def _environment(out: Path, facts: dict[str, Any], launched: DistEnv | None,
                 ranks_here: set[int]) -> dict[str, Any]:
    """The machine's snapshot: in full on a node's leader, its host alone on the other ranks."""
    from benchbench.machine import environment

    if launched is None or launched.is_node_leader:
        return environment.snapshot(out, facts, own=ranks_here)
    return {"host": environment.host_snapshot()}


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
