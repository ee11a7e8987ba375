"""The probe API: what the runner knows of a probe (ProbeSpec), what a probe is told
(ProbeContext) and what it hands back (ProbeOutput).

A probe is a folder: its `config.py` (torch-free) holds the frozen config, its defaults for
every device and for --quick, and its SPEC; its `run.py` exposes `run(ctx, cfg) -> ProbeOutput`.
It times its operations through `ctx.time_op`, which calibrates, warms up, samples and respects
the time budget, and it builds measurements with `throughput`. It raises ProbeSkipped when it
cannot measure anything here. The config it is given is resolved: no field is left at auto.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from benchbench.core.config import ProbeConfig, build_probe_config
from benchbench.core.results import RESOURCES, Measurement
from benchbench.core.sampling import Budget, RepeatPolicy, collect, warm_up
from benchbench.core.stats import median
from benchbench.core.timing import Clock, Timer, calibrate_inner
from benchbench.probes.meter import Meter

Facts = dict[str, Any]  # what torch saw in a worker: machine/environment.torch_facts()
# defaults(device, quick, facts) -> {field: value}: a probe's auto fields resolved
Defaults = Callable[[str, bool, Facts], dict[str, Any]]


def _no_defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ProbeSpec:
    """What the runner needs to know about a probe without importing its heavy module."""

    name: str
    description: str
    config_cls: type[ProbeConfig]
    run: str  # the module exposing run(ctx, cfg) -> ProbeOutput; imported in the worker only
    gpu_resource: str
    cpu_resource: str
    requires_gpu: bool = False
    needs_data: bool = False  # reads the dataset (the user's --data-dir or a generated one)
    distributed: bool = False  # runs on every rank of a torchrun/srun launch, not per node
    budget_weight: float = 1.0  # its share of a shared time budget, relative to other probes
    # Its share on a GPU where that differs: a training probe pays each precision's start-up
    # (allocation, cuDNN's autotuning) on a GPU, seconds where its steps take milliseconds.
    gpu_weight: float | None = None
    # Exchanges data between GPUs: on a single-GPU machine, outside a multi-node launch, it
    # has nothing to measure, and is skipped before its worker starts.
    exchanges: bool = False
    per_gpu: bool = False  # measures every GPU: its budget grows with their number
    repeatable: bool = False  # cheap to run again in a fresh worker: it runs in every round
    # The auto fields' values for a device, --quick and the machine's facts; applied before
    # --config and --set. The one home of every default and every --quick value.
    defaults: Defaults = field(default=_no_defaults)

    def __post_init__(self) -> None:
        for r in (self.gpu_resource, self.cpu_resource):
            if r not in RESOURCES:
                raise ValueError(f"probe {self.name}: unknown resource {r!r}")

    def resource(self, device: str) -> str:
        return self.gpu_resource if device == "cuda" else self.cpu_resource

    def weight(self, device: str) -> float:
        """Its share of the run's time budget on `device`."""
        return self.gpu_weight if device == "cuda" and self.gpu_weight is not None \
            else self.budget_weight

    def skip_reason(self, device: str, no_gpu_reason: str | None, gpus: int | None = None,
                    launched: bool = False) -> str | None:
        """Why this probe would not run on `device` (with `gpus` GPUs visible, in a multi-node
        launch or not), or None when it would."""
        if self.requires_gpu and device != "cuda":
            return f"it needs a CUDA GPU and {no_gpu_reason or 'the run uses the CPU'}"
        if self.exchanges and device == "cuda" and gpus == 1 and not launched:
            return ("one GPU: there is nothing to exchange (its collectives would move no data "
                    "between devices)")
        return None

    def resolve(self, device: str, quick: bool, facts: Facts,
                overrides: dict[str, Any] | None = None) -> Any:
        """The config this probe runs with: its defaults, then the user's values (a value of
        auto, None here, leaves the default), validated. Raises ConfigError."""
        chosen = {k: v for k, v in (overrides or {}).items() if v is not None}
        return build_probe_config(self.config_cls,
                                  {**self.defaults(device, quick, facts), **chosen}, self.name)


class ProbeSkipped(Exception):
    """Raised by a probe that cannot run here; the message completes 'skipped, because …'."""


class ProbeFailed(Exception):
    """Raised by a probe whose input failed it in a way one line says in full (its dataset
    removed during the run): the probe is recorded as failed with that line and what to do,
    no traceback, and the run goes on."""


T = TypeVar("T")


def resolved(value: T | None, name: str) -> T:
    """A config field that the probe's defaults always fill: ProbeSpec.resolve ran before
    run(), so None here is a bug in the probe's defaults(), said as such."""
    if value is None:
        raise RuntimeError(f"{name} was left at auto: the probe's defaults() must set it")
    return value


@dataclass
class ProbeOutput:
    measurements: list[Measurement]
    resource: str | None = None  # overrides the spec's resource for this device
    params: dict[str, Any] = field(default_factory=dict)  # auto fields as resolved
    notes: list[str] = field(default_factory=list)  # partial skips, each "x skipped, because …"
    artifacts: list[str] = field(default_factory=list)  # files written into inputs.run_dir


@dataclass(frozen=True)
class RunInputs:
    """What the run hands the data-path probes: where to write, what to read, what came before.

    Every path is a string (it crosses a process boundary) or None when the run has none.
    """

    run_dir: str | None = None  # the run folder; probes keep raw tool output here (artifacts)
    data_dir: str | None = None  # ImageFolder dataset: the user's --data-dir or the generated one
    dataset: dict[str, Any] | None = None  # dataset.py's facts: source, counts, file sizes
    storage_path: str | None = None  # --storage-path: where the storage probe puts its scratch
    previous: dict[str, Any] = field(default_factory=dict)  # finished probes: name -> result dict
    distributed: dict[str, Any] | None = None  # launch.DistEnv as a dict, when torchrun/srun


@dataclass(frozen=True)
class Timed:
    """Seconds per single call for each timed sample, and how they were taken."""

    per_call_s: list[float]
    inner: int
    warmup_runs: int
    stop: str
    # The GPU's SM clock while each sample ran (Hz; None where a read failed), or None where
    # it could not be read at all (the CPU, no NVML)
    sm_clock_Hz: list[float | None] | None = None

    def context(self) -> dict[str, Any]:
        out: dict[str, Any] = {"calls_per_sample": self.inner, "warmup_runs": self.warmup_runs,
                               "stopped_by": self.stop}
        if self.sm_clock_Hz is not None:
            out["sm_clock_Hz"] = self.sm_clock_Hz
            out["sm_clock_read"] = SM_CLOCK_READ
        return out


# How a timed sample's SM clock is read (the measurement's context says it beside the values)
SM_CLOCK_READ = "NVML's SM clock as each timed sample began and as it ended, their mean"


Progress = Callable[[str, int, int], None]


@dataclass
class ProbeContext:
    """What the runner tells a probe. Passed explicitly; there are no globals."""

    device: str  # "cpu" or "cuda"
    policy: RepeatPolicy
    budget: Budget
    facts: dict[str, Any]  # device facts gathered by environment.torch_facts()
    progress: Progress = lambda desc, done, total: None  # noqa: E731
    clock: Clock = time.perf_counter
    inputs: RunInputs = field(default_factory=RunInputs)
    # How device work is timed and observed; the simulator swaps in a fake clock and a device
    # profile. Left out, it reads `clock`.
    meter: Meter = field(default_factory=Meter)

    def __post_init__(self) -> None:
        if self.meter.clock is not self.clock and self.meter.clock is time.perf_counter:
            self.meter = Meter(self.clock)

    def time_op(self, fn: Callable[[], Any], device: str, items_left: int,
                min_sample_s: float, timer: Timer | None = None, warm: bool = False) -> Timed:
        """Warm up, then calibrate, then time `fn` on `device` ('cpu' or 'cuda:N') within
        this probe's budget. Calibrating after the warm-up matters: a first call that creates
        a cuBLAS handle or loads kernels would make one call look long enough for a sample.
        `warm`: the device already ran this probe's work at its clocks, so the warm-up is its
        calls only (policy.warmup_steps), not its seconds."""
        timer = timer or self.meter.timer_for(device)
        read = self.meter.sm_clock_reader(device, self.gpu_uuid(device))
        deadline = self.budget.deadline(items_left)
        policy = dataclasses.replace(self.policy, warmup_s=0.0) if warm else self.policy
        warmups = warm_up(lambda: timer(fn, 1), policy, deadline, self.clock)
        inner = calibrate_inner(timer, fn, min_sample_s)
        clocks: list[float | None] = []

        def sample() -> float:
            """One timed sample; where the SM clock can be read, read outside the timing as
            it begins and ends (the clock moves within milliseconds at a power limit)."""
            if read is None:
                return timer(fn, inner)
            before = read()
            took = timer(fn, inner)
            after = read()
            clocks.append(None if before is None or after is None else (before + after) / 2)
            return took

        result = collect(sample, self.policy, deadline, self.clock, warmup=False)
        return Timed([s / inner for s in result.samples], inner, warmups, result.stop,
                     clocks if read is not None else None)

    def gpu_uuid(self, device: str) -> str | None:
        """The UUID of the GPU `device` names ('cuda:N', from the run's facts), or None."""
        index = device.partition(":")[2]
        gpus = self.facts.get("gpus") or []
        if not index.isdigit() or int(index) >= len(gpus):
            return None
        uuid = gpus[int(index)].get("uuid")
        return str(uuid) if uuid else None


def throughput(metric: str, key: dict[str, Any], timed: Timed, work_per_call: float,
               unit: str, context: dict[str, Any] | None = None) -> Measurement:
    """A rate measurement (work per second), one sample per timed sample, median as value."""
    kept = [i for i, t in enumerate(timed.per_call_s) if t > 0]
    samples = [work_per_call / timed.per_call_s[i] for i in kept]
    if not samples:
        raise RuntimeError(f"{metric}: every sample took zero time; the timer is broken")
    timing = timed.context()
    if timed.sm_clock_Hz is not None:  # one clock per sample kept, as the samples are
        timing["sm_clock_Hz"] = [timed.sm_clock_Hz[i] for i in kept]
    return Measurement(
        metric=metric, key=key, value=median(samples), unit=unit, statistic="median",
        samples=samples, higher_is_better=True, context={**timing, **(context or {})},
    )


def median_of(metric: str, key: dict[str, Any], samples: list[float], unit: str, *,
              higher_is_better: bool, context: dict[str, Any] | None = None) -> Measurement:
    """A measurement whose value is the median of its samples, every sample kept."""
    return Measurement(metric=metric, key=key, value=median(samples), unit=unit,
                       statistic="median", samples=samples, higher_is_better=higher_is_better,
                       context=context or {})


def total_over_time(metric: str, key: dict[str, Any], value: float, samples: list[float],
                    unit: str, context: dict[str, Any] | None = None) -> Measurement:
    """A rate whose value is its total work over its total time (each sample a part's own
    rate), every sample kept: higher is better."""
    return Measurement(metric=metric, key=key, value=value, unit=unit,
                       statistic="total_over_time", samples=samples, higher_is_better=True,
                       context=context or {})


def peak_of(metric: str, key: dict[str, Any], per_size: list[Measurement],
            size_field: str, unit: str) -> Measurement:
    """The best of several per-size medians: statistic 'max' over those medians."""
    best = max(per_size, key=lambda m: m.value)
    return Measurement(
        metric=metric, key=key, value=best.value, unit=unit, statistic="max",
        samples=[m.value for m in per_size], higher_is_better=True,
        context={f"best_{size_field}": best.key[size_field],
                 size_field: [m.key[size_field] for m in per_size]},
    )
