"""Probe `pipeline`: the real input pipeline feeding the real ResNet50 training step.

In one process, on one model, at the same batch, image size and precision, it measures
total_ips (batches from the loader, copied to the device, trained on) with each step's data
wait and device time, and compute_ips (synthetic data already on the device, as the resnet50
probe does). The analysis derives accelerator utilisation, AU = total_ips / compute_ips, as
MLPerf Storage does; the probe's resource is the one that result points at.

The real half runs first, in steady state (steady.py): the loader starts before anything else,
so that its workers fork while this process still runs one thread, and whole rounds of the
workers are timed after a warm round, at the rate the workers sustain rather than the rate a
full buffer feeds. The synthetic half follows with the loader closed, so that no worker
competes with the step it times. Whether the fewest timed rounds and steps can fit the budget
(within half again it: PREFLIGHT_SLACK) is judged before the loader starts, from this run's
resnet50 and dataloader figures where they exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchbench.analysis.derive import AU_PASS
from benchbench.core.names import counted
from benchbench.core.results import Measurement
from benchbench.probes._loaders import LoaderError, batching, build_loader
from benchbench.probes.api import (
    ProbeContext,
    ProbeOutput,
    ProbeSkipped,
    median_of,
    resolved,
    total_over_time,
)
from benchbench.probes.dataset import run_samples
from benchbench.workloads._training import (
    PRECISIONS,
    Precision,
    plan_steps,
    precision_order,
    step_measurements,
    usable_precisions,
    warm_up,
)
from benchbench.workloads.models.resnet import ResNetTrainer
from benchbench.workloads.pipeline import steady
from benchbench.workloads.pipeline.config import PipelineConfig
from benchbench.workloads.pipeline.steady import FEW_ROUNDS, Rounds, Source, Trainer

# The fewest timed steps of a half that the probe reports, labelled "few steps": three give a
# median with a spread. A probe that ran warm steps times these rather than skipping.
FEW_STEPS = 3
# A budget is soft (the runner stops a probe only at 3x it): the probe starts when its fewest
# steps are predicted to fit within half again its budget, as other probes' smallest unit of
# work overruns theirs. Without it a quick run on 2 cores skipped the probe whenever a
# ResNet50 step ran 10-15% slow (4.22 s and 4.49 s needed against 4.1 s and 3.9 s).
PREFLIGHT_SLACK = 1.5
# The real half's share of the budget: its first step, the drain, a warm round and at least
# five timed rounds of the workers, where the synthetic half times a warm-up and a few steps.
REAL_SHARE = 0.75


@dataclass(frozen=True)
class Job:
    dev: str
    precision: Precision
    batch: int
    image: int
    steps: int  # timed steps wanted per half


@dataclass
class Halves:
    """The timed rounds of the real half and the steps of the synthetic one."""

    rounds: Rounds  # real half
    compute_times: list[float]  # synthetic half: seconds per step
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


def loader_alone(previous: dict[str, Any], loader: str, workers: int,
                 image: int | None = None) -> tuple[float, int] | None:
    """(images/s, batch) the dataloader probe measured for this loader and worker count (at
    this image size, where one is given), earlier in this run; None when it did not."""
    for m in (previous.get("dataloader") or {}).get("measurements", []):
        k = m.get("key") or {}
        if m["metric"] == "throughput" and k.get("loader") == loader and \
                k.get("workers") == workers and \
                (image is None or k.get("image_size") in (None, image)) and m["value"] > 0:
            return float(m["value"]), int(k.get("batch_size") or 0)
    return None


def preflight(job: Job, previous: dict[str, Any], loader: str, workers: int,
              remaining_s: float) -> str | None:
    """Why the fewest timed rounds (FEW_ROUNDS of the workers on loader batches, three steps
    on synthetic data) cannot fit PREFLIGHT_SLACK x `remaining_s`, judged from this run's
    resnet50 step (same precision, scaled to this batch and image size) and dataloader rate
    (this loader and worker count) before the loader starts; None when they fit or neither
    probe measured."""
    step_s = first_s = loader_s = None
    for m in (previous.get("resnet50") or {}).get("measurements", []):
        if m["metric"] == "step_time" and m["key"].get("precision") == job.precision.name:
            c, size = m.get("context") or {}, m["key"].get("image_size") or job.image
            scale = job.batch / max(1, int(c.get("batch") or job.batch)) * (job.image / size) ** 2
            step_s, first_s = m["value"] * scale, float(c.get("first_step_s") or 0.0)
    alone = loader_alone(previous, loader, workers)
    if alone is not None:
        loader_s = job.batch / alone[0]
    if step_s is None and loader_s is None:
        return None
    real = max(step_s or 0.0, loader_s or 0.0)
    group, prefetch = batching(loader, workers)
    # The first step, the prefetched batches drained, a warm round and the fewest timed
    # rounds on loader batches, then a warm step and three timed ones on synthetic data.
    need = ((first_s or 0.0) + prefetch * (loader_s or 0.0) + (1 + FEW_ROUNDS) * group * real
            + (1 + FEW_STEPS) * (step_s or 0.0))
    if need <= PREFLIGHT_SLACK * remaining_s:
        return None
    seen = ", ".join(x for x in (
        f"a resnet50 step of ~{step_s:.3g} s" if step_s is not None else "",
        f"a {loader} batch every ~{loader_s:.3g} s with {workers} workers"
        if loader_s is not None else "") if x)
    return (f"{FEW_ROUNDS} timed rounds of {counted(group, 'step')} on loader batches (a "
            f"batch from each worker) and three on synthetic data would take ~{need:.3g} s "
            f"({seen}, as this run measured them), beyond the {remaining_s:.3g} s of its time "
            f"budget by more than {PREFLIGHT_SLACK:g}x; decided before starting the loader")


def _plan(est_s: float, wanted: int, share_s: float) -> tuple[int, bool]:
    """(timed steps of the synthetic half, few): what the share affords, at least FEW_STEPS
    (then `few`)."""
    n = plan_steps(est_s, wanted, share_s)
    few = n is None or n < FEW_STEPS
    return max(FEW_STEPS, n or 0), few


def measure(ctx: ProbeContext, job: Job, open_loader: Callable[[], Source],
            make_trainer: Callable[[], Trainer], alone_ips: float | None = None) -> Halves:
    """Both halves, real data first (see the module's docstring), the real one within
    REAL_SHARE of what is left of the budget. `alone_ips`: the loader's own rate at this
    configuration."""
    ctx.meter.set_tf32(job.precision.tf32)
    ctx.meter.set_cudnn_benchmark(job.dev, True)  # fixed shapes: cuDNN picks its fastest kernels
    try:
        return _both_halves(ctx, job, open_loader, make_trainer, alone_ips)
    finally:
        ctx.meter.set_tf32(False)


def _both_halves(ctx: ProbeContext, job: Job, open_loader: Callable[[], Source],
                 make_trainer: Callable[[], Trainer], alone_ips: float | None) -> Halves:
    dev = job.dev
    with open_loader() as loader:
        real = steady.real_half(ctx, job.precision, job.steps, dev, loader, make_trainer,
                                ctx.budget.remaining() * REAL_SHARE, alone_ips)
        corrupt = loader.corrupt
    ctx.progress("compute: synthetic data on the device", 3, 4)
    real.trainer.set_synthetic_batch(job.batch, job.image)
    warm = warm_up(real.step, ctx, dev, ctx.budget.remaining())
    n_c, few_compute = _plan(warm.step_s, job.steps, ctx.budget.remaining())
    compute_times = ctx.meter.step_times(real.step, n_c, dev)
    ctx.progress("done", 4, 4)
    notes = list(real.notes)
    if few_compute:
        notes.append(f"few steps: {n_c} timed on synthetic data, because the time budget "
                     "allowed no more; their spread is in the samples")
    context = {**real.context, "few_steps": real.context["few_steps"] or few_compute}
    return Halves(real.rounds, compute_times, corrupt, context, notes)


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
    samples = run_samples(ctx.inputs.data_dir)
    alone = loader_alone(ctx.inputs.previous, loader_kind, workers, image)
    ctx.progress(f"starting the loader: {loader_kind}, {workers} workers", 0, 4)
    try:
        halves = measure(
            ctx, job, lambda: build_loader(loader_kind, samples, batch, workers, image, dev),
            lambda: ResNetTrainer(dev, bool(cfg.channels_last), cfg.compile),
            alone[0] if alone else None)
    except LoaderError as exc:
        raise ProbeSkipped(f"the {loader_kind} loader with {workers} workers failed: {exc}"
                           ) from None

    key = {"device": dev, "precision": job.precision.name, "image_size": image,
           "batch_size": batch, "loader": loader_kind, "workers": workers}
    context: dict[str, Any] = {"loader_chosen_by": why,
                               "compute_steps": len(halves.compute_times),
                               "corrupt_files": halves.corrupt,
                               "channels_last": bool(cfg.channels_last), **halves.context}
    if dev != "cpu":
        context["gpu_name"] = ctx.meter.device_name(dev)
    if alone:
        context["loader_alone_ips"], context["loader_alone_batch"] = alone
    measurements = measurements_of(halves, key, batch, context)
    notes += halves.notes
    if halves.corrupt:
        one = halves.corrupt == 1
        notes.append(f"{counted(halves.corrupt, 'image file')} that "
                     f"{'fails' if one else 'fail'} to decode {'was' if one else 'were'} "
                     "skipped and counted")
    if samples.rejected:
        notes.append(f"{counted(len(samples.rejected), 'file')} with an image extension left "
                     f"out, because {'it is' if len(samples.rejected) == 1 else 'they are'} no "
                     "image")
    # The probe is filed under what it found limits training here.
    total, compute = measurements[0].value, measurements[1].value
    resource = ("gpu_compute" if dev != "cpu" else "cpu_compute") \
        if total >= AU_PASS * compute else "cpu_dataloading"
    return ProbeOutput(measurements, resource=resource, notes=notes,
                       params={"batch_size": batch, "loader": loader_kind, "workers": workers,
                               "precision": job.precision.name})


def measurements_of(h: Halves, key: dict[str, Any], batch: int, context: dict[str, Any]
                    ) -> list[Measurement]:
    """total_throughput (the steady rate; a sample per timed round), compute_throughput,
    data_wait and compute_time (a sample per timed step of the real half), in that order."""
    r = h.rounds
    value, _ = r.steady()
    rounds = {**context, **steady.round_context(r)}
    compute, _ = step_measurements(key, h.compute_times, batch, "samples/s", context)
    waits = [w for ws in r.waits for w in ws]
    computes = [c for cs in r.computes for c in cs]
    return [
        total_over_time("total_throughput", key, value,
                        [n / w for n, w in zip(r.images, r.walls, strict=True)], "samples/s",
                        rounds),
        dataclasses.replace(compute, metric="compute_throughput"),
        median_of("data_wait", key, waits, "s", higher_is_better=False,
                  context={**rounds, "mean": sum(waits) / len(waits)}),
        median_of("compute_time", key, computes, "s", higher_is_better=False,
                  context={**rounds, "mean": sum(computes) / len(computes)}),
    ]
