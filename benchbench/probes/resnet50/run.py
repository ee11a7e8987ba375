"""Probe `resnet50`: training-step throughput of torchvision's ResNet50 per precision.

Synthetic images already on the device, so this is the compute capacity (DLE's compute_ips);
the data path is measured by the dataloader probes. SGD with momentum and weight decay,
cross-entropy loss, channels_last on the GPU. Work is counted in images (samples/s).
"""

from __future__ import annotations

from typing import Any

import torch
import torchvision
from torch import nn

from benchbench.probes._training import Precision, Step, TrainingJob, make_step, run_training
from benchbench.probes.api import ProbeContext, ProbeOutput
from benchbench.probes.configs import ResNet50Config

# 'auto' batch search stops here: beyond it a single GPU gains nothing in throughput.
BATCH_CAP = 2048
# DLE's per-GPU batch: the default, so that runs on different machines compare.
GPU_BATCH = 256


class ResNetTrainer:
    """ResNet50 with its optimizer and loss on one device; its step trains on the batch last
    given to set_batch. The pipeline probe feeds it real batches, this probe synthetic ones."""

    def __init__(self, dev: str, channels_last: bool, compile_model: bool) -> None:
        self.dev = dev
        self.fmt = torch.channels_last if channels_last else torch.contiguous_format
        model = torchvision.models.resnet50(weights=None).to(dev, memory_format=self.fmt)
        self.forward = torch.compile(model) if compile_model else model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                         weight_decay=1e-4)
        self.loss = nn.CrossEntropyLoss()
        self.x: torch.Tensor | None = None
        self.y: torch.Tensor | None = None

    def set_batch(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x = x.to(self.dev, non_blocking=True).contiguous(memory_format=self.fmt)
        self.y = y.to(self.dev, non_blocking=True)

    def set_synthetic_batch(self, batch: int, image: int) -> None:
        gen = torch.Generator(device=self.dev).manual_seed(batch)
        self.set_batch(torch.randn(batch, 3, image, image, device=self.dev, generator=gen),
                       torch.randint(0, 1000, (batch,), device=self.dev, generator=gen))

    def step(self, precision: Precision) -> Step:
        return make_step(lambda: self.loss(self.forward(self.x), self.y), self.optimizer,
                         precision, self.dev)


def prepare_device(dev: str) -> None:
    if dev != "cpu":
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels


def job_for(cfg: ResNet50Config, dev: str, context: dict[str, Any]) -> TrainingJob:
    """What run_training measures for this config on `dev` (the simulator plans with it too)."""
    default_batch = GPU_BATCH if dev != "cpu" else 16
    batch = cfg.batch_size if cfg.batch_size is not None else default_batch
    return TrainingJob(
        dev=dev, precisions=cfg.precisions, batch_size=batch, default_batch=default_batch,
        batch_cap=BATCH_CAP, steps=cfg.steps, work_per_sample=1.0, unit="samples/s",
        key=lambda precision: {"device": dev, "precision": precision,
                               "image_size": cfg.image_size, "batch_size": batch},
        context=context)


def run(ctx: ProbeContext, cfg: ResNet50Config) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    image, channels_last = cfg.image_size, bool(cfg.channels_last)
    prepare_device(dev)

    def build(batch: int, precision: Precision) -> Step:
        trainer = ResNetTrainer(dev, channels_last, cfg.compile)
        trainer.set_synthetic_batch(batch, image)
        return trainer.step(precision)

    context = {"channels_last": channels_last, "compile": cfg.compile,
               "threads": torch.get_num_threads()}
    if dev != "cpu":
        context["gpu_name"] = torch.cuda.get_device_name(dev)
    job = job_for(cfg, dev, context)
    measurements, notes = run_training(ctx, job, build)
    return ProbeOutput(measurements, notes=notes, params={"batch_size": job.batch_size})
