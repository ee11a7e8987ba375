"""Many cores on a small machine: a loader and a training step whose costs are known wall times.

A 2-core box cannot show what 16 or 200 decoding cores do to a measurement. An item that
sleeps for `seconds` costs wall time but no CPU, so W workers over such items behave like W
cores, each decoding an image in `seconds`: the true steady rate is W / seconds images/s, and a
test holds the dataloader's or the pipeline's figure against it (STYLE.md, "Measuring at
scale"). The loader is the probes' own torchvision Loader (DataLoader, its workers, prefetching
and cycling sampler) over these items instead of image files; the step sleeps too.

Used by the tests and scripts/steady_state_bench.py; no probe runs it in a real run.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import torch

from benchbench.probes._loaders import Loader, _TorchvisionLoader


class SleepImages(torch.utils.data.Dataset[tuple[Any, ...]]):
    """`images` items, each a random (3, side, side) image that takes `seconds` to 'decode'."""

    def __init__(self, images: int, seconds: float, side: int = 8) -> None:
        self.images, self.seconds, self.side = images, seconds, side

    def __len__(self) -> int:
        return self.images

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        time.sleep(self.seconds)
        return torch.rand(3, self.side, self.side), index % 2


def sleep_loader(seconds_per_image: float, batch_size: int, workers: int,
                 images: int = 1024, side: int = 8) -> Loader:
    """A torchvision Loader whose every image costs `seconds_per_image` of wall time. Its
    workers are forked, whatever threads this process runs: they only sleep and draw a small
    random tensor, and 64 of them from a forkserver that has not imported torch (a test
    process's may have been started without it) would each import it, minutes on 2 cores."""
    return _TorchvisionLoader(SleepImages(images, seconds_per_image, side), batch_size,
                              workers, "cpu", seed=0,
                              context=multiprocessing.get_context("fork"))


def steady_rate(workers: int, seconds_per_image: float) -> float:
    """Images/s that `workers` such workers deliver in steady state: W · b / (b · t)."""
    return max(1, workers) / seconds_per_image


class SleepTrainer:
    """A trainer whose step takes `step_s` of wall time on any batch: the pipeline probe's
    compute half without a model, so that its accelerator utilisation is known in advance.
    `first_step_s`, when given, is the first step's time instead, as a GPU's allocation and
    cuDNN autotuning make it: the loader's workers fill their prefetch buffer meanwhile."""

    def __init__(self, step_s: float, first_step_s: float | None = None) -> None:
        self.step_s = step_s
        self.first_step_s = step_s if first_step_s is None else first_step_s
        self.steps = 0

    def set_synthetic_batch(self, batch: int, image_size: int) -> None:
        return None

    def set_batch(self, images: Any, labels: Any) -> None:
        return None

    def step(self, precision: Any) -> Callable[[], None]:
        def step() -> None:
            time.sleep(self.step_s if self.steps else self.first_step_s)
            self.steps += 1

        return step
