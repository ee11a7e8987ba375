"""Probe `pipeline`: the real input pipeline feeding the real ResNet50 training step.

In one process, on one model, at the same batch, image size and precision, it measures
total_ips (batches from the loader, copied to the device, trained on), with the data-wait and
compute time of each step, and compute_ips (synthetic data already on the device, as the
resnet50 probe does). The analysis derives accelerator utilisation, AU = total_ips /
compute_ips, as MLPerf Storage does; the probe's resource is the one that result points at.

The real half runs first, in steady state (see `measure`): the loader starts before anything
else, so that its workers fork while this process still runs one thread; what the workers
prefetched while the first step allocated and autotuned is discarded, and the timed steps span
whole rounds of the workers. The warm round's waits are kept: where the first step outlasted
the workers' filling of their buffer (4 s on an H200), the drain leaves every worker starting
its next batch at once, so the first warm step waits about one worker's batch time, the
loader's own rate inside the pipeline (on a third H200 the timed round ran at 4,427 img/s where
the dataloader probe alone read 3,318: a difference these waits can place;
scripts/loader_vs_pipeline.py reads them). The synthetic half follows with the loader closed,
so that no worker competes with the step it times. Whether three timed steps of each half can
fit the budget (within half again it: PREFLIGHT_SLACK) is judged before the loader starts, from
this run's resnet50 and dataloader figures where they exist; a probe that has run warm steps
reports at least three timed ones, and on loader batches at least one round of the workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchbench.analysis.derive import AU_PASS
from benchbench.core.results import Measurement
from benchbench.probes._loaders import LoaderError, batching, build_loader
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, median_of, resolved
from benchbench.probes.dataset import loader_samples
from benchbench.workloads._training import (
    PRECISIONS,
    Precision,
    Step,
    plan_steps,
    precision_order,
    step_measurements,
    usable_precisions,
    warm_up,
)
from benchbench.workloads.models.resnet import ResNetTrainer
from benchbench.workloads.pipeline.config import PipelineConfig

# The fewest timed steps of a half that the probe reports, labelled "few steps": three give a
# median with a spread. A probe that ran warm steps times these rather than skipping.
FEW_STEPS = 3
# A budget is soft (the runner stops a probe only at 3x it): the probe starts when its fewest
# steps are predicted to fit within half again its budget, as other probes' smallest unit of
# work overruns theirs. Without it a quick run on 2 cores skipped the probe whenever a
# ResNet50 step ran 10-15% slow (4.22 s and 4.49 s needed against 4.1 s and 3.9 s).
PREFLIGHT_SLACK = 1.5


class Source(Protocol):
    """What the pipeline needs of a loader: a _loaders.Loader, or the simulator's."""

    parallel: int
    prefetch: int
    start: str

    @property
    def corrupt(self) -> int: ...
    def stream(self) -> Iterator[Any]: ...
    def __enter__(self) -> Source: ...
    def __exit__(self, *exc: object) -> None: ...


class Trainer(Protocol):
    """What the pipeline needs of a trainer: ResNetTrainer, or emulated.SleepTrainer."""

    def set_batch(self, x: Any, y: Any) -> None: ...
    def set_synthetic_batch(self, batch: int, image: int) -> None: ...
    def step(self, precision: Precision) -> Step: ...


@dataclass(frozen=True)
class Job:
    dev: str
    precision: Precision
    batch: int
    image: int
    steps: int  # timed steps wanted per half


@dataclass
class Halves:
    """Seconds per timed step of each half, and how they were taken."""

    walls: list[float]  # real half: host interval per step, closed by a final sync
    waits: list[float]  # real half: waiting for the loader
    computes: list[float]  # real half: the step itself
    compute_times: list[float]  # synthetic half
    corrupt: int
    context: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def choose_loader(cfg: PipelineConfig, previous: dict[str, Any], cores: int
                  ) -> tuple[str, int, str]:
    """(loader, workers, why): the config's choice, else the dataloader probe's best (it ran
    earlier in this run), else one worker per usable core."""
    best = None
    dl = previous.get("dataloader") or {}
    for m in dl.get("measurements", []):
        if m["metric"] == "best_throughput":
            best = m["context"]
    loader = cfg.loader or (best["loader"] if best else "torchvision")
    if cfg.workers is not None:
        return loader, cfg.workers, "config"
    if best and best["loader"] == loader:
        return loader, int(best["workers"]), "the dataloader probe's best configuration"
    return loader, cores, "default: one worker per usable core"


def preflight(job: Job, previous: dict[str, Any], loader: str, workers: int,
              remaining_s: float) -> str | None:
    """Why the fewest timed steps (three of each half, and on loader batches at least one round
    of the workers) cannot fit PREFLIGHT_SLACK x `remaining_s`, judged
    from this run's resnet50 step (same precision, scaled to this batch and image size) and
    dataloader rate (this loader and worker count) before the loader starts; None when they
    fit or neither probe measured."""
    step_s = first_s = loader_s = None
    for m in (previous.get("resnet50") or {}).get("measurements", []):
        if m["metric"] == "step_time" and m["key"].get("precision") == job.precision.name:
            c, size = m.get("context") or {}, m["key"].get("image_size") or job.image
            scale = job.batch / max(1, int(c.get("batch") or job.batch)) * (job.image / size) ** 2
            step_s, first_s = m["value"] * scale, float(c.get("first_step_s") or 0.0)
    for m in (previous.get("dataloader") or {}).get("measurements", []):
        if m["metric"] == "throughput" and m["key"].get("loader") == loader and \
                m["key"].get("workers") == workers and m["value"] > 0:
            loader_s = job.batch / m["value"]
    if step_s is None and loader_s is None:
        return None
    real = max(step_s or 0.0, loader_s or 0.0)
    group, prefetch = batching(loader, workers)
    timed = max(group, FEW_STEPS)  # the fewest timed steps on loader batches (_plan)
    # The first step, a round of warm steps and the timed ones on loader batches, the
    # prefetched batches drained, then a warm step and three timed ones on synthetic data.
    need = ((first_s or 0.0) + (group + timed) * real + prefetch * (loader_s or 0.0)
            + (1 + FEW_STEPS) * (step_s or 0.0))
    if need <= PREFLIGHT_SLACK * remaining_s:
        return None
    seen = ", ".join(x for x in (
        f"a resnet50 step of ~{step_s:.3g} s" if step_s is not None else "",
        f"a {loader} batch every ~{loader_s:.3g} s with {workers} workers"
        if loader_s is not None else "") if x)
    steps = ("three timed steps of each half" if timed == FEW_STEPS else
             f"a round of {timed} timed steps on loader batches (one per worker) and three on "
             "synthetic data")
    return (f"{steps} would take ~{need:.3g} s ({seen}, as this run measured them), beyond "
            f"the {remaining_s:.3g} s of its time budget by more than {PREFLIGHT_SLACK:g}x; "
            "decided before starting the loader")


def _plan(est_s: float, wanted: int, share_s: float, group: int) -> tuple[int, bool]:
    """(timed steps, few): what the share affords, at least FEW_STEPS (then `few`), in whole
    rounds of the loader's workers, at least one. Workers that start together deliver their
    batches together: a count under one round times part of a round, the burst of batches
    they finished at once or the wait for the next round, whichever the phase gives. On two
    H200s, 3 timed steps of 16 workers read AU 0.93 and 0.54, with loaders that fed 65% and
    55% of the step on their own."""
    n = plan_steps(est_s, wanted, share_s)
    few = n is None or n < FEW_STEPS
    n = max(FEW_STEPS, n or 0)
    up = -(-n // group) * group
    if n < group or up * est_s <= max(share_s, n * est_s):
        return up, few
    return n // group * group, few


def _real_steps(ctx: ProbeContext, trainer: Trainer, step: Step, batches: Iterator[Any],
                n: int, dev: str) -> tuple[list[float], list[float], list[float]]:
    """n steps on loader batches: (wall seconds per step, data wait per step, compute per
    step). Wall times are consecutive host intervals closed by a final sync, so they add up to
    the true total even though a GPU step returns before its kernels finish; compute is the
    device's own time for the step (events around it on a GPU)."""
    marks, waits, events = [], [], []
    for _ in range(n):
        t0 = ctx.clock()
        marks.append(t0)
        x, y = next(batches)
        waits.append(ctx.clock() - t0)
        trainer.set_batch(x, y)
        events.append(ctx.meter.event(dev))
        step()
        events.append(ctx.meter.event(dev))
    ctx.meter.sync(dev)
    marks.append(ctx.clock())
    computes = [ctx.meter.elapsed(events[2 * i], events[2 * i + 1]) for i in range(n)]
    return [marks[i + 1] - marks[i] for i in range(n)], waits, computes


def _warm_real(ctx: ProbeContext, trainer: Trainer, step: Step, batches: Iterator[Any],
               group: int, dev: str, share_s: float) -> tuple[int, float, list[float]]:
    """Warm steps on loader batches in whole rounds of the workers: at least one round and
    policy.warmup_steps, and policy.warmup_s while that is within a quarter of `share_s`.
    Returns (steps, seconds, each step's wait for its batch)."""
    wanted = -(-max(ctx.policy.warmup_steps, 1) // group) * group
    t0, done, waits = ctx.clock(), 0, []
    while done < wanted or (ctx.clock() - t0 < ctx.policy.warmup_s
                            and ctx.clock() - t0 < share_s / 4):
        for _ in range(group):
            asked = ctx.clock()
            batch = next(batches)
            waits.append(ctx.clock() - asked)
            trainer.set_batch(*batch)
            step()
        done += group
    ctx.meter.sync(dev)
    return done, ctx.clock() - t0, waits


def measure(ctx: ProbeContext, job: Job, open_loader: Callable[[], Source],
            make_trainer: Callable[[], Trainer]) -> Halves:
    """Both halves, real data first (see the module's docstring), each within half of what is
    left of the budget when it starts."""
    notes: list[str] = []
    ctx.meter.set_tf32(job.precision.tf32)
    ctx.meter.set_cudnn_benchmark(job.dev, True)  # fixed shapes: cuDNN picks its fastest kernels
    try:
        return _both_halves(ctx, job, open_loader, make_trainer, notes)
    finally:
        ctx.meter.set_tf32(False)


def _both_halves(ctx: ProbeContext, job: Job, open_loader: Callable[[], Source],
                 make_trainer: Callable[[], Trainer], notes: list[str]) -> Halves:
    dev = job.dev
    start, half = ctx.clock(), ctx.budget.remaining() / 2
    with open_loader() as loader:
        batches = loader.stream()  # runs on into new passes; their start-up cost counts
        first = next(batches)  # every worker has started
        trainer = make_trainer()
        step = trainer.step(job.precision)
        trainer.set_batch(*first)
        first_s = ctx.meter.timed_once(step, dev)  # allocation, cuDNN's autotuning
        # The workers kept decoding during that step: their finished batches would arrive at
        # once and time the buffer rather than the loader.
        for _ in range(loader.prefetch):
            next(batches)
        group = max(1, loader.parallel)
        ctx.progress(f"input pipeline: warm-up in rounds of {group}", 1, 4)
        warm_n, warm_s, warm_waits = _warm_real(ctx, trainer, step, batches, group, dev,
                                                half)
        share = max(0.0, half - (ctx.clock() - start))
        n, few_real = _plan(warm_s / warm_n, job.steps, share, group)
        ctx.progress(f"input pipeline: {n} timed steps", 2, 4)
        walls, waits, computes = _real_steps(ctx, trainer, step, batches, n, dev)
        corrupt = loader.corrupt
        context = {"first_step_s": first_s, "prefetched_discarded": loader.prefetch,
                   "warmup_steps": warm_n, "steps_per_round": group,
                   "worker_start": loader.start,
                   "warmup_waits_s": [round(w, 5) for w in warm_waits]}

    ctx.progress("compute: synthetic data on the device", 3, 4)
    trainer.set_synthetic_batch(job.batch, job.image)
    warm = warm_up(step, ctx, dev, ctx.budget.remaining())
    n_c, few_compute = _plan(warm.step_s, job.steps, ctx.budget.remaining(), 1)
    compute_times = ctx.meter.step_times(step, n_c, dev)
    ctx.progress("done", 4, 4)
    rounds = f" (one round of the {group} workers)" if n == group > FEW_STEPS else ""
    for few, what, k in ((few_real, f"loader batches{rounds}", n),
                         (few_compute, "synthetic data", n_c)):
        if few:
            notes.append(f"few steps: {k} timed on {what}, because the time budget allowed "
                         "no more; their spread is in the samples")
    context["few_steps"] = few_real or few_compute
    return Halves(walls, waits, computes, compute_times, corrupt, context, notes)


def run(ctx: ProbeContext, cfg: PipelineConfig) -> ProbeOutput:
    if not ctx.inputs.data_dir:
        raise ProbeSkipped("no dataset: pass --data-dir or let the run generate one")
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    precisions = resolved(cfg.precisions, "precisions")
    batch, image = resolved(cfg.batch_size, "batch_size"), resolved(cfg.image_size, "image_size")
    notes: list[str] = []
    usable = precision_order(dev, usable_precisions(dev, precisions, notes, ctx.facts))
    if not usable:
        raise ProbeSkipped("; ".join(notes))
    job = Job(dev, PRECISIONS[usable[0]], batch, image, resolved(cfg.steps, "steps"))
    loader_kind, workers, why = choose_loader(cfg, ctx.inputs.previous,
                                              int(ctx.facts["usable_cores"]))
    too_long = preflight(job, ctx.inputs.previous, loader_kind, workers, ctx.budget.remaining())
    if too_long:
        raise ProbeSkipped(too_long)
    samples = loader_samples(ctx.inputs.data_dir)
    ctx.progress(f"starting the loader: {loader_kind}, {workers} workers", 0, 4)
    try:
        halves = measure(
            ctx, job, lambda: build_loader(loader_kind, samples, batch, workers, image, dev),
            lambda: ResNetTrainer(dev, bool(cfg.channels_last), cfg.compile))
    except LoaderError as exc:
        raise ProbeSkipped(f"the {loader_kind} loader with {workers} workers failed: {exc}"
                           ) from None

    key = {"device": dev, "precision": job.precision.name, "image_size": image,
           "batch_size": batch, "loader": loader_kind, "workers": workers}
    context: dict[str, Any] = {"loader_chosen_by": why, "steps": len(halves.walls),
                               "compute_steps": len(halves.compute_times),
                               "corrupt_files": halves.corrupt,
                               "channels_last": bool(cfg.channels_last), **halves.context}
    if dev != "cpu":
        context["gpu_name"] = ctx.meter.device_name(dev)
    measurements = measurements_of(halves, key, batch, context)
    notes += halves.notes
    if halves.corrupt:
        notes.append(f"{halves.corrupt} image file(s) that fail to decode were skipped and "
                     "counted")
    if samples.rejected:
        notes.append(f"{len(samples.rejected)} file(s) with an image extension left out, "
                     "because they are no image")
    # The probe is filed under what it found limits training here.
    total, compute = measurements[0].value, measurements[1].value
    resource = ("gpu_compute" if dev != "cpu" else "cpu_compute") \
        if total >= AU_PASS * compute else "cpu_dataloading"
    return ProbeOutput(measurements, resource=resource, notes=notes,
                       params={"batch_size": batch, "loader": loader_kind, "workers": workers,
                               "precision": job.precision.name})


def measurements_of(h: Halves, key: dict[str, Any], batch: int, context: dict[str, Any]
                    ) -> list[Measurement]:
    """total_throughput, compute_throughput, data_wait and compute_time, in that order."""
    total, _ = step_measurements(key, h.walls, batch, "samples/s", context)
    compute, _ = step_measurements(key, h.compute_times, batch, "samples/s", context)
    n = len(h.walls)
    return [
        dataclasses.replace(total, metric="total_throughput"),
        dataclasses.replace(compute, metric="compute_throughput"),
        median_of("data_wait", key, h.waits, "s", higher_is_better=False,
                  context={**context, "mean": sum(h.waits) / n}),
        median_of("compute_time", key, h.computes, "s", higher_is_better=False,
                  context={**context, "mean": sum(h.computes) / n}),
    ]
