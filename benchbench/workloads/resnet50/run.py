"""Probe `resnet50`: training-step throughput of torchvision's ResNet50 per precision.

Synthetic images already on the device, so this is the compute capacity (DLE's compute_ips);
the data path is measured by the dataloader probes. SGD with momentum and weight decay,
cross-entropy loss, channels_last on the GPU. Work is counted in images (samples/s).
"""

from __future__ import annotations

from typing import Any

import torch

from benchbench.probes.api import ProbeContext, ProbeOutput, resolved
from benchbench.workloads._config import RESNET_BATCH
from benchbench.workloads._training import Precision, Step, TrainingJob, run_training
from benchbench.workloads.models.resnet import ResNetTrainer
from benchbench.workloads.resnet50.config import BATCH_CAP, ResNet50Config


def job_for(cfg: ResNet50Config, dev: str, context: dict[str, Any]) -> TrainingJob:
    """What run_training measures for this config on `dev` (the simulator plans with it too)."""
    # An integer or "auto" (kept apart: mypy would type resolved(int | str | None) as object).
    size = cfg.batch_size
    batch = size if isinstance(size, str) else resolved(size, "batch_size")
    return TrainingJob(
        dev=dev, precisions=resolved(cfg.precisions, "precisions"), batch_size=batch,
        default_batch=RESNET_BATCH["cpu" if dev == "cpu" else "cuda"],
        batch_cap=BATCH_CAP, steps=resolved(cfg.steps, "steps"), work_per_sample=1.0,
        unit="samples/s", min_timed_s=resolved(cfg.min_timed_s, "min_timed_s"),
        key=lambda precision: {"device": dev, "precision": precision,
                               "image_size": cfg.image_size, "batch_size": batch},
        context=context)


def cudnn_mode(ctx: ProbeContext, dev: str, precision: Precision) -> None:
    """cuDNN's autotuner for ResNet50's fixed shapes, so that each precision runs its fastest
    kernels; fp32 (TF32 off) takes cuDNN's heuristics instead: its search tries slow fp32
    algorithms at every shape, about a minute on an H200, more than a quick run's share."""
    ctx.meter.set_cudnn_benchmark(dev, precision.name != "fp32")


def run(ctx: ProbeContext, cfg: ResNet50Config) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    image, channels_last = resolved(cfg.image_size, "image_size"), bool(cfg.channels_last)

    def build(batch: int, precision: Precision) -> Step:
        cudnn_mode(ctx, dev, precision)
        trainer = ResNetTrainer(dev, channels_last, cfg.compile)
        trainer.set_synthetic_batch(batch, image)
        return trainer.step(precision)

    context: dict[str, Any] = {"channels_last": channels_last, "compile": cfg.compile,
                               "threads": torch.get_num_threads()}
    if dev != "cpu":
        context["gpu_name"] = ctx.meter.device_name(dev)
    job = job_for(cfg, dev, context)
    measurements, notes = run_training(ctx, job, build)
    return ProbeOutput(measurements, notes=notes, params={"batch_size": job.batch_size})
