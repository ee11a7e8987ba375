"""Probe `resnet50`: training-step throughput of torchvision's ResNet50 per precision.

Synthetic images already on the device, so this is the compute capacity (DLE's compute_ips);
the data path is measured by the dataloader probes. SGD with momentum and weight decay,
cross-entropy loss, channels_last on the GPU. Work is counted in images (samples/s).
"""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from benchbench.probe import ProbeContext, ProbeOutput
from benchbench.probe_configs import ResNet50Config
from benchbench.workloads._training import Precision, Step, make_step, run_training

# 'auto' batch search stops here: beyond it a single GPU gains nothing in throughput.
BATCH_CAP = 2048
# DLE's per-GPU batch: the default, so that runs on different machines compare.
GPU_BATCH = 256


def run(ctx: ProbeContext, cfg: ResNet50Config) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    image, channels_last = cfg.image_size, bool(cfg.channels_last)
    if dev != "cpu":
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    def build(batch: int, precision: Precision) -> Step:
        gen = torch.Generator(device=dev).manual_seed(batch)
        model = torchvision.models.resnet50(weights=None).to(dev, memory_format=fmt)
        forward = torch.compile(model) if cfg.compile else model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        x = torch.randn(batch, 3, image, image, device=dev, generator=gen)
        x = x.contiguous(memory_format=fmt)
        y = torch.randint(0, 1000, (batch,), device=dev, generator=gen)
        loss = nn.CrossEntropyLoss()
        return make_step(lambda: loss(forward(x), y), optimizer, precision, dev)

    default_batch = GPU_BATCH if dev != "cpu" else 16
    batch = cfg.batch_size if cfg.batch_size is not None else default_batch

    def key_for(precision: str) -> dict:
        return {"device": dev, "precision": precision, "image_size": image,
                "batch_size": batch}

    context = {"channels_last": channels_last, "compile": cfg.compile,
               "threads": torch.get_num_threads()}
    if dev != "cpu":
        context["gpu_name"] = torch.cuda.get_device_name(dev)
    measurements, notes = run_training(
        ctx, dev, cfg.precisions, batch, cfg.steps, build, key_for, 1.0, "samples/s",
        BATCH_CAP, default_batch, context)
    return ProbeOutput(measurements, notes=notes, params={"batch_size": batch})
