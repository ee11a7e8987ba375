"""ResNet50 with its optimizer and loss on one device: the trainer that the resnet50, pipeline
and ddp_scaling probes share."""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from benchbench.workloads._training import Precision, Step, make_step


class ResNetTrainer:
    """ResNet50 with its optimizer and loss on one device; its step trains on the batch last
    given to `use`. The pipeline probe feeds it real batches (`prepare` copies one to the
    device, on the meter's side stream), the resnet50 probe synthetic ones."""

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

    def prepare(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch on the device in the model's memory format (an asynchronous copy from
        pinned memory)."""
        return (x.to(self.dev, non_blocking=True).contiguous(memory_format=self.fmt),
                y.to(self.dev, non_blocking=True))

    def use(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.x, self.y = batch

    def set_synthetic_batch(self, batch: int, image: int) -> None:
        gen = torch.Generator(device=self.dev).manual_seed(batch)
        self.use(self.prepare(
            torch.randn(batch, 3, image, image, device=self.dev, generator=gen),
            torch.randint(0, 1000, (batch,), device=self.dev, generator=gen)))

    def step(self, precision: Precision) -> Step:
        return make_step(lambda: self.loss(self.forward(self.x), self.y), self.optimizer,
                         precision, self.dev)

