"""Run the selected probes, each isolated, within time budgets, saving results after each one.

The parent process never imports torch or touches CUDA: device facts and probes run in worker
processes (see isolation.py). results.json is rewritten atomically after every probe, so a
crash, Ctrl-C or SIGTERM keeps everything that finished.
"""

from __future__ import annotations

import dataclasses
import signal
import socket
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from benchbench import __version__
from benchbench.analysis import derive as analysis
from benchbench.analysis import verdict
from benchbench.analysis.verdict_types import Verdict
from benchbench.core import interruption, results
from benchbench.core import rounds as rounds_mod
from benchbench.core.config import RunConfig
from benchbench.core.results import Measurement, ProbeResult, RunResult, SaveError
from benchbench.engine.catalog import Registry
from benchbench.engine.isolation import Cancelled, Isolator
from benchbench.engine.launch import DistEnv
from benchbench.engine.pacing import Pacer, promise
from benchbench.engine.worker import ProbeJob
from benchbench.machine.telemetry import Guarded, Sampler, default_sampler, store
from benchbench.probes.api import ProbeSpec, RunInputs

# The selected probes share a time budget by weight (training probes count double). Seconds
# for all of them together, by --quick and device:
# - CPU, --quick: the whole `run --quick` must stay within a minute on a 2-core box, with
#   start-up (~3 s), a first run's dataset (~5 s) and the reports (~1.5 s) on top
#   (scripts/run_time_bench.py measures it).
# - CPU, default: a probe of weight 1 gets up to DEFAULT_PROBE_S, so that a default run,
#   dataset generation included (~35 s on 2 cores), stays within 4 minutes.
# - GPU: a GPU box is bought for its GPUs and is fast at everything else; its default run gets
#   10 minutes of probe time over its three rounds (the whole run stays within 10 minutes on
#   one H200 and 15 on eight H100s, as simulate.py estimates), so that ResNet50 measures all
#   four precisions in every round, cuDNN's autotuning of each included; --quick gets
#   about 3.4 minutes of budget in one pass (core/rounds.py): every precision of both models
#   and the pipeline's five rounds; most probes end well before their budget, and the whole
#   run plans under 3 minutes on one H200 (simulate.py, tests/unit/test_simulate.py).
# The stability probe (weight 2 of 17 on a CPU, of 18 on a GPU) came with its own share on
# top of these (45, 170, 150 and 600 s before it), so that the others kept theirs: it runs
# 5 s with --quick, 20 s by default on a CPU and 60 s on a GPU. memory_fit and inference
# (weights 2 and 1.5) came the same way: the totals grew by 3.5/17 on a CPU (51, 193 s before)
# and 3.5/18 on a GPU (169, 675 s before). --quick on a CPU then came down from 61.5 to 50 s
# so that the whole smoke test, with its ~8 s of start-up, workers and reports, stays under a
# minute on a 2-core VM (58 s measured; 65-70 s at 61.5). LoadGen's scenarios (issue 32) took
# it to 60-63 s, and it came down again to 40 s, with the reports' imports moved beside the
# forkserver's (commands/run.py), the Server part's one short run assured, and memory_fit
# (fused AdamW, its second mode priced) and generation kept to their budgets: 47.6-53.2 s
# in 12 runs, 47.6-60.9 s in 40 over an evening whose slow hours made everything 15-30%
# slower (53-62 s at 42 s before, the Server part skipped in some). Since then the run is
# paced to its minute (pacing.py): a slow moment leaves out second rounds instead.
# 46 s since ResNet50 trains at 224 px in a quick run too (issue 70: quick and default agree
# within 10%), with DALI's CPU loader measured: resnet50 and the dataloader weigh more, the
# rest a little less.
TOTAL_S = {(True, "cpu"): 46.0, (False, "cpu"): 233.0,
           (True, "cuda"): 202.0, (False, "cuda"): 806.0}
QUICK_TOTAL_S = TOTAL_S[(True, "cpu")]
DEFAULT_TOTAL_S = TOTAL_S[(False, "cpu")]
DEFAULT_PROBE_S = 60.0
# A probe that measures every GPU gets this much more budget per GPU after the first: the
# others measure one size each, about a quarter of the first GPU's sweep.
PER_GPU_EXTRA = 0.25
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def probe_budget(weight: float, total_weight: float, quick: bool,
                 time_budget: float | None, device: str = "cpu", gpus: int = 1) -> float:
    """Seconds one probe may spend: --time-budget, else its weighted share of the total for
    this device (training steps cost more than a matmul sweep, so those probes weigh more),
    grown by PER_GPU_EXTRA for each GPU after the first when `gpus` > 1 (a probe that
    measures every GPU)."""
    if time_budget:
        return float(time_budget)
    share = weight / max(total_weight, 1e-9)
    total = TOTAL_S[(quick, "cuda" if device == "cuda" else "cpu")]
    base = total * share if quick or device == "cuda" else min(DEFAULT_PROBE_S * weight,
                                                               total * share)
    return base * (1 + PER_GPU_EXTRA * (max(1, gpus) - 1))


def hard_limit(budget_s: float) -> float:
    """When a probe overruns this, it is stopped: its budget is soft, this is not."""
    return max(3 * budget_s, budget_s + 60)


def default_out_dir(now: datetime | None = None) -> Path:
    now = now or datetime.now(timezone.utc)
    return Path("runs") / f"{now.strftime('%Y%m%dT%H%M%SZ')}-{socket.gethostname()}"


class Display(Protocol):
    def start_probe(self, name: str, index: int, count: int) -> None: ...
    def update(self, desc: str, done: int, total: int) -> None: ...
    # `status`: what a person reads where it is not the result's own ("cut short")
    def end_probe(self, result: ProbeResult, status: str | None = None) -> None: ...


class SilentDisplay:
    def start_probe(self, name: str, index: int, count: int) -> None: ...
    def update(self, desc: str, done: int, total: int) -> None: ...
    def end_probe(self, result: ProbeResult, status: str | None = None) -> None: ...


def resolve_device(requested: str, facts: dict[str, Any]) -> str:
    if requested == "auto":
        return "cuda" if facts.get("cuda_available") else "cpu"
    return requested


class Phases:
    """Where a run's wall time goes: each step's seconds since the previous mark. Kept in
    results.json under "timings" and summed up on stderr at the end of a run."""

    def __init__(self, started: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.t0 = self.last = clock()
        self.spent: dict[str, float] = {}
        if started is not None:  # the interpreter's start and imports, before main() ran
            self.spent["python start-up"] = round(max(0.0, started), 3)

    def mark(self, name: str) -> None:
        now = self.clock()
        self.spent[name] = round(self.spent.get(name, 0.0) + now - self.last, 3)
        self.last = now

    def total(self) -> float:
        return sum(self.spent.values())

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.spent.items())
        return f"{self.total():.1f} s in all: {parts}"


class StopFlag:
    """Set by SIGINT or SIGTERM (Slurm and CI send SIGTERM); the runner checks it before each
    probe, and the isolator while one runs."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.at: str | None = None  # when the first signal came
        self.late: str | None = None  # a signal that came once the probes were done

    def __call__(self) -> bool:
        return self.signal_name is not None

    def install(self) -> Callable[[], None]:
        def handler(signum: int, frame: Any) -> None:
            if self.signal_name is None:
                self.at = utc_now()
            self.signal_name = signal.Signals(signum).name

        return _handle(handler)

    def deferring(self, what: str) -> Callable[[], None]:
        """While `what` ends (the reports: seconds), a first signal is noted and said, not
        acted on, so that no file is left half written; a second stops at once (the CLI's
        KeyboardInterrupt: one line, exit 130). The caller reads `late` once it is done."""

        def handler(signum: int, frame: Any) -> None:
            if self.late is not None:
                raise KeyboardInterrupt
            self.late = signal.Signals(signum).name
            print(f"benchbench: {self.late}: finishing {what} first, in seconds; send it again "
                  f"to stop at once", file=sys.stderr, flush=True)

        return _handle(handler)


def _handle(handler: Callable[[int, Any], None]) -> Callable[[], None]:
    """`handler` for SIGINT and SIGTERM; returns what puts the old handlers back."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, handler)

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, h)

    return restore


def selected_specs(registry: Registry, cfg: RunConfig,
                   launched: DistEnv | None = None) -> list[ProbeSpec]:
    """The probes this process runs, in order. Under torchrun or srun every rank runs the
    distributed probes, first, so that all ranks reach them together; only local rank 0 of
    each node runs the per-node ones."""
    specs = [s for s in registry
             if (not cfg.only or s.name in cfg.only) and s.name not in cfg.skip]
    if launched is None:
        return specs
    return [s for s in specs if s.distributed] + (
        [s for s in specs if not s.distributed] if launched.is_node_leader else [])


def resolve_configs(registry: Registry, cfg: RunConfig, device: str, facts: dict[str, Any],
                    launched: DistEnv | None = None) -> dict[str, Any]:
    """Every selected probe's config, resolved for the device, --quick and the machine's facts
    under the user's values; a bad combination (a seq_len the preset cannot take) raises
    ConfigError before anything is measured or written."""
    return {spec.name: spec.resolve(device, cfg.quick, facts, cfg.overrides.get(spec.name, {}))
            for spec in selected_specs(registry, cfg, launched)}


class Runner:
    """One run, built complete: its configs, environment, dataset and display come in; it
    executes the probes, saves results.json after each, and computes the verdict once."""

    def __init__(self, registry: Registry, cfg: RunConfig, out_dir: Path, argv: list[str],
                 facts: dict[str, Any], environment: dict[str, Any], isolator: Isolator, *,
                 device: str | None = None, configs: dict[str, Any] | None = None,
                 dataset: dict[str, Any] | None = None, display: Display | None = None,
                 stop: StopFlag | None = None, launched: DistEnv | None = None,
                 telemetry: Callable[[], Sampler] | None = None,
                 process_start: float | None = None) -> None:
        self.registry = registry
        # When (time.monotonic) this process started: a run with a wall-clock promise paces
        # its probes to it (pacing.py).
        self.process_start = process_start
        self.cfg = cfg
        self.out_dir = out_dir
        self.facts = facts
        self.isolator = isolator
        self.display = display or SilentDisplay()
        self.stop = stop or StopFlag()
        self.launched = launched
        # Builds one sampler per probe, which records CPU and GPU readings while it runs, on
        # the GPUs this run's torch sees.
        uuids = [g["uuid"] for g in facts.get("gpus") or [] if g.get("uuid")]
        self.telemetry = telemetry or (lambda: default_sampler(uuids or None))
        # Only global rank 0 writes results.json; other ranks send theirs to it at the end.
        self.writes = launched is None or launched.is_master
        self.inputs = RunInputs(run_dir=str(out_dir),
                                data_dir=dataset["path"] if dataset else None, dataset=dataset,
                                storage_path=cfg.storage_path,
                                distributed=launched.to_dict() if launched else None)
        self.device = device or resolve_device(cfg.device, facts)
        self.configs = configs if configs is not None else resolve_configs(
            registry, cfg, self.device, facts, launched)
        self.verdict: Verdict | None = None  # computed by analyse(), once the probes ran
        self.run = RunResult(
            tool={"name": "benchbench", "version": __version__},
            label=cfg.label, started_at=utc_now(), environment=environment,
            config={**cfg.to_dict(), "device_resolved": self.device,
                    "rounds_resolved": cfg.rounds or rounds_mod.default_rounds(cfg.quick,
                                                                                self.device)},
            argv=argv,
            extra={**({"cost": {"usd_per_hour": cfg.price_per_hour}}
                      if cfg.price_per_hour else {}),
                   **({"dataset": dataset} if dataset is not None else {})},
        )

    @property
    def results_path(self) -> Path:
        return self.out_dir / "results.json"

    def selected(self) -> list[ProbeSpec]:
        return selected_specs(self.registry, self.cfg, self.launched)

    def worst_case_s(self) -> float:
        """The longest the selected probes can take together: the sum of their hard limits."""
        specs = selected_specs(self.registry, self.cfg)
        total = sum(s.weight(self.device) for s in specs)
        return sum(hard_limit(self.budget_for(s, total)) for s in specs)

    def budget_for(self, spec: ProbeSpec, total_weight: float) -> float:
        gpus = int(self.facts.get("cuda_device_count") or 1) if spec.per_gpu else 1
        return probe_budget(spec.weight(self.device), total_weight, self.cfg.quick,
                            self.cfg.time_budget, self.device, gpus)

    def analyse(self) -> None:
        """Derived figures and the verdict, stored as a cache stamped with the analysis
        version (report and compare recompute them)."""
        self.run.extra["derived"] = analysis.derive(self.run)
        self.verdict = verdict.verdict(self.run)
        self.run.verdict = self.verdict.to_dict()

    def save(self) -> None:
        if not self.writes:
            return
        try:
            results.save(self.run, self.results_path)
        except OSError as exc:  # a full disk, a quota, a vanished folder
            raise SaveError(f"could not write {self.results_path}: {exc.strerror or exc}; the "
                            "previous results.json is intact (it is replaced atomically), "
                            "with every probe that finished before this one") from None

    def execute(self) -> int:
        specs = self.selected()
        no_gpu = self.facts.get("no_gpu_reason")
        gpus = int(self.facts.get("cuda_device_count") or 0)
        skip = {s.name: s.skip_reason(self.device, no_gpu, gpus, self.launched is not None)
                for s in specs}
        total_weight = sum(s.weight(self.device) for s in specs if skip[s.name] is None)
        rounds = self.rounds
        plan = rounds_mod.schedule(
            specs, [s.repeatable and skip[s.name] is None for s in specs], rounds)
        # Each round gets its share of the probe's budget: rounds spread the same timed work
        # over the run instead of adding to it.
        times = {s.name: rounds if s.repeatable and skip[s.name] is None else 1 for s in specs}
        pacer = Pacer(
            promise(self.cfg.quick, self.device, self.cfg.time_budget, self.launched is not None),
            self.process_start if self.process_start is not None else time.monotonic(),
            [0.0 if skip[s.name] is not None else self.budget_for(s, total_weight) / times[s.name]
             for s, _ in plan])
        self.save()
        failures, cut = 0, None
        left: list[tuple[str, int]] = []  # what a signal kept from starting: (probe, round)
        for i, (spec, round_no) in enumerate(plan):
            first = self.run.probe(spec.name) if round_no > 1 else None
            if round_no > 1 and (first is None or first.status != "ok"):
                pacer.drop(i)  # it could not measure here, or a signal kept it from starting:
                continue  # another round would not either
            if (self.stop() or cut is not None) and skip[spec.name] is None:
                left.append((spec.name, round_no))  # a signal came: no probe starts after it
                continue
            if not pacer.keep(i, spec.name, round_no):
                continue  # the run is behind its promised end: this round is left out
            label = spec.name + (f" (round {round_no}/{times[spec.name]})"
                                 if times[spec.name] > 1 else "")
            self.display.start_probe(label, i, len(plan))
            started, t0 = utc_now(), time.monotonic()
            if skip[spec.name] is not None:
                pr = ProbeResult(
                    name=spec.name,
                    status="skipped",
                    resource=spec.resource(self.device),
                    reason=skip[spec.name],
                    started_at=started,
                    duration_s=0.0,
                )
            else:
                try:
                    pr = self._run_one(spec, pacer.planned[i], started, round_no)
                except Cancelled:
                    cut = (spec.name, round_no)
                    pr = ProbeResult(
                        name=spec.name,
                        status="failed",
                        resource=spec.resource(self.device),
                        reason=f"interrupted by {self.stop.signal_name} before it finished",
                        started_at=started,
                    )
            pr.duration_s = round(time.monotonic() - t0, 3)
            pacer.finished(i)
            failures += pr.status == "failed" and cut is None
            said = interruption.CUT if cut == (spec.name, round_no) else None
            self._keep(pr, round_no, times[spec.name], said)
            self.save()
            self.display.end_probe(dataclasses.replace(pr, name=label), said)
        self.run.finished_at = utc_now()
        if (pacing := pacer.record()) is not None:
            self.run.extra["pacing"] = pacing
        if cut is not None or left:
            self.run.extra[interruption.KEY] = self._interruption(specs, cut, left).to_dict()
        self.analyse()
        self.save()
        if interruption.KEY in self.run.extra:
            return EXIT_INTERRUPTED
        return EXIT_FAILED if failures else EXIT_OK

    def _interruption(self, specs: list[ProbeSpec], cut: tuple[str, int] | None,
                      left: list[tuple[str, int]]) -> interruption.Interruption:
        """What the signal stopped: the probe it cut short, and the probes and later rounds
        (`left`) that never started. A probe that cannot run here is recorded as skipped
        either way: that starts no worker."""
        started = {p.name for p in self.run.probes}
        cut_first = cut[0] if cut is not None and cut[1] == 1 else None
        return interruption.Interruption(
            signal=self.stop.signal_name or "a signal", at=self.stop.at or utc_now(),
            planned=tuple(s.name for s in specs),
            finished=tuple(s.name for s in specs if s.name in started and s.name != cut_first),
            cut_short=cut[0] if cut else None, cut_round=cut[1] if cut else 1,
            not_run=tuple(name for name, r in left if r == 1),
            rounds_not_run=sum(r > 1 for _, r in left))

    @property
    def rounds(self) -> int:
        return self.cfg.rounds or rounds_mod.default_rounds(self.cfg.quick, self.device)

    def _keep(self, pr: ProbeResult, round_no: int, times: int,
              said: str | None = None) -> None:
        """Round 1 adds the probe's result; a later round is folded into it (`said`: its
        status as a person reads it, where not its own)."""
        if round_no == 1:
            self.run.probes.append(rounds_mod.start(pr) if times > 1 else pr)
            return
        i = next(k for k, p in enumerate(self.run.probes) if p.name == pr.name)
        self.run.probes[i] = rounds_mod.merge(self.run.probes[i], pr, round_no, said)

    def _run_one(self, spec: ProbeSpec, budget: float, started: str,
                 round_no: int = 1) -> ProbeResult:
        cfg = self.configs[spec.name]
        job = ProbeJob(name=spec.name, run=spec.run, device=self.device,
                       min_repeats=self.cfg.repeats or (3 if self.cfg.quick else 5),
                       budget_s=budget, config=cfg, facts=self.facts,
                       inputs=dataclasses.replace(self.inputs, previous={
                           p.name: dataclasses.asdict(p) for p in self.run.probes
                           if p.status == "ok"}))
        params = dataclasses.asdict(cfg)
        resource = spec.resource(self.device)
        sampler = Guarded(self.telemetry)
        sampler.start()
        try:
            outcome = self.isolator.call(
                "benchbench.engine.worker:run_probe", job, on_progress=self.display.update,
                # a distributed probe may first wait out its own collective timeout, which
                # names the rank that hung: let it report
                timeout_s=hard_limit(budget) + getattr(cfg, "timeout_s", 0),
                should_stop=self.stop)
        finally:
            store(self.run.extra, spec.name, sampler.stop(), resource, round_no)
        if not outcome.ok:
            if outcome.detail:
                suffix = f".round{round_no}" if round_no > 1 else ""
                (self.out_dir / f"{spec.name}{suffix}.traceback.txt").write_text(outcome.detail)
            return ProbeResult(
                name=spec.name,
                status="failed",
                resource=resource,
                reason=outcome.error,
                params=params,
                started_at=started,
            )
        body = outcome.value
        self.run.extra.setdefault("artifacts", []).extend(
            {"probe": spec.name, "path": a} for a in body.get("artifacts", []))
        return ProbeResult(
            name=spec.name,
            status=body["status"],
            resource=body["resource"] or resource,
            reason=body["reason"],
            params={**params, **body["params"]},
            started_at=started,
            measurements=[Measurement(**m) for m in body["measurements"]],
        )
