"""Probe `pipeline`: the real input pipeline feeding the real ResNet50 training step.

In one process, on one model, at the same batch, image size and precision, it measures
compute_ips (synthetic data already on the device, as the resnet50 probe does) and total_ips
(batches from the loader, copied to the device, trained on), with the data-wait and compute
time of each step. The analysis derives accelerator utilisation, AU = total_ips / compute_ips,
as MLPerf Storage does; the probe's resource is the one that result points at.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from benchbench.analysis.derive import AU_PASS
from benchbench.probes._devices import apply_tf32
from benchbench.probes._loaders import build_loader
from benchbench.probes._training import (
    PRECISIONS,
    Step,
    plan_steps,
    precision_order,
    step_measurements,
    usable_precisions,
    warm_up,
)
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, median_of, resolved
from benchbench.probes.dataset import loader_samples
from benchbench.probes.models.resnet import ResNetTrainer, prepare_device
from benchbench.probes.pipeline.config import PipelineConfig


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


def _real_steps(ctx: ProbeContext, trainer: ResNetTrainer, step: Step, batches: Any, n: int,
                dev: str) -> tuple[list[float], list[float], list[float]]:
    """n steps on loader batches: (wall seconds per step, data wait per step, compute per
    step). Wall times are consecutive host intervals closed by a final sync, so they add up to
    the true total even though a GPU step returns before its kernels finish."""
    marks, waits, computes = [], [], []
    gpu = dev.startswith("cuda")
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * n)] if gpu else []
    for i in range(n):
        t0 = ctx.clock()
        marks.append(t0)
        x, y = next(batches)
        t1 = ctx.clock()
        waits.append(t1 - t0)
        trainer.set_batch(x, y)
        if gpu:
            events[2 * i].record()
        step()
        if gpu:
            events[2 * i + 1].record()
        else:
            computes.append(ctx.clock() - t1)
    ctx.meter.sync(dev)
    marks.append(ctx.clock())
    if gpu:
        computes = [events[2 * i].elapsed_time(events[2 * i + 1]) / 1e3 for i in range(n)]
    return [marks[i + 1] - marks[i] for i in range(n)], waits, computes


def run(ctx: ProbeContext, cfg: PipelineConfig) -> ProbeOutput:
    if not ctx.inputs.data_dir:
        raise ProbeSkipped("no dataset: pass --data-dir or let the run generate one")
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    precisions = resolved(cfg.precisions, "precisions")
    batch, image = resolved(cfg.batch_size, "batch_size"), resolved(cfg.image_size, "image_size")
    steps = resolved(cfg.steps, "steps")
    notes: list[str] = []
    usable = precision_order(dev, usable_precisions(dev, precisions, notes, ctx.facts))
    if not usable:
        raise ProbeSkipped("; ".join(notes))
    precision = PRECISIONS[usable[0]]
    apply_tf32(precision.tf32)
    prepare_device(dev)
    loader_kind, workers, why = choose_loader(cfg, ctx.inputs.previous,
                                              int(ctx.facts["usable_cores"]))
    ctx.progress(f"starting the loader: {loader_kind}, {workers} workers", 0, 3)
    # The loader starts first: its workers fork from this process while it still runs one
    # thread (in milliseconds, with no second torch import). They fill their prefetch queue
    # and wait while the compute half runs.
    samples = loader_samples(ctx.inputs.data_dir)
    with build_loader(loader_kind, samples, batch, workers, image, dev) as loader:
        batches = loader.stream()  # runs on into new passes; their start-up cost counts
        pending = [next(batches)]
        trainer = ResNetTrainer(dev, bool(cfg.channels_last), cfg.compile)
        step = trainer.step(precision)

        ctx.progress("compute: synthetic data on the device", 1, 3)
        trainer.set_synthetic_batch(batch, image)
        # Two halves share the budget: synthetic data, then the real loader.
        warm = warm_up(step, ctx, dev, ctx.budget.remaining() / 2)
        n = plan_steps(warm.step_s, steps, ctx.budget.remaining() / 2)
        if n is None:
            raise ProbeSkipped(f"one warm training step takes ~{warm.step_s:.3g} s, beyond "
                               "the time budget")
        compute_times = ctx.meter.step_times(step, n, dev)

        ctx.progress(f"input pipeline: {loader_kind}, {workers} workers", 2, 3)
        for _ in range(max(1, ctx.policy.warmup_steps)):
            trainer.set_batch(*(pending.pop() if pending else next(batches)))
            step()
        ctx.meter.sync(dev)
        walls, waits, computes = _real_steps(ctx, trainer, step, batches, n, dev)
        corrupt = loader.corrupt
    apply_tf32(False)
    ctx.progress("done", 3, 3)

    key = {"device": dev, "precision": precision.name, "image_size": image, "batch_size": batch,
           "loader": loader_kind, "workers": workers}
    context: dict[str, Any] = {"loader_chosen_by": why, "steps": n, "corrupt_files": corrupt,
                               "channels_last": bool(cfg.channels_last)}
    if dev != "cpu":
        context["gpu_name"] = torch.cuda.get_device_name(dev)
    total, _ = step_measurements(key, walls, batch, "samples/s", context)
    compute, _ = step_measurements(key, compute_times, batch, "samples/s", context)
    measurements = [
        dataclasses.replace(total, metric="total_throughput"),
        dataclasses.replace(compute, metric="compute_throughput"),
        median_of("data_wait", key, waits, "s", higher_is_better=False,
                  context={**context, "mean": sum(waits) / n}),
        median_of("compute_time", key, computes, "s", higher_is_better=False,
                  context={**context, "mean": sum(computes) / n}),
    ]
    if corrupt:
        notes.append(f"{corrupt} image file(s) that fail to decode were skipped and counted")
    if samples.rejected:
        notes.append(f"{len(samples.rejected)} file(s) with an image extension left out, "
                     "because they are no image")
    # The probe is filed under what it found limits training here.
    compute_bound = total.value >= AU_PASS * compute.value
    resource = ("gpu_compute" if dev != "cpu" else "cpu_compute") if compute_bound \
        else "cpu_dataloading"
    return ProbeOutput(measurements, resource=resource, notes=notes,
                       params={"batch_size": batch, "loader": loader_kind, "workers": workers,
                               "precision": precision.name})
