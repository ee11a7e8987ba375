"""Many cores on a small machine: a loader and a training step whose costs are known wall times.

A 2-core box cannot show what 16 or 200 decoding cores do to a measurement. An item that
sleeps for `seconds` costs wall time but no CPU, so W workers over such items behave like W
cores, each decoding an image in `seconds`: the true steady rate is W / seconds images/s, and a
test holds the dataloader's or the pipeline's figure against it (STYLE.md, "Measuring at
scale"). The loader is the probes' own torchvision Loader (DataLoader, its workers, prefetching
and cycling sampler) over these items instead of image files; the step sleeps too, on the host
or queued on a SleepDevice, a GPU's queue in real time (timed by a SleepMeter).

Used by the tests and scripts/steady_state_bench.py; no probe runs it in a real run.
"""

from __future__ import annotations

import math
import multiprocessing
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from benchbench.probes._loaders import Loader, _TorchvisionLoader
from benchbench.probes.meter import Meter


class SleepImages(torch.utils.data.Dataset[tuple[Any, ...]]):
    """`images` items, each a random (3, side, side) image that takes `seconds` to 'decode';
    with `jitter`, each item's time is `seconds` times a log-normal factor of that spread and
    mean 1, drawn from `seed` and its index, as real images differ in size."""

    def __init__(self, images: int, seconds: float, side: int = 8, jitter: float = 0.0,
                 seed: int = 0) -> None:
        self.images, self.seconds, self.side = images, seconds, side
        self.jitter, self.seed = jitter, seed

    def __len__(self) -> int:
        return self.images

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        factor = 1.0
        if self.jitter:
            z = random.Random(self.seed * 1_000_003 + index).gauss(0.0, 1.0)
            factor = math.exp(self.jitter * z - self.jitter**2 / 2)
        time.sleep(self.seconds * factor)
        return torch.rand(3, self.side, self.side), index % 2


def sleep_loader(seconds_per_image: float, batch_size: int, workers: int,
                 images: int = 1024, side: int = 8, jitter: float = 0.0,
                 seed: int = 0) -> Loader:
    """A torchvision Loader whose every image costs `seconds_per_image` of wall time (see
    SleepImages for `jitter`). Its workers are forked, whatever threads this process runs:
    they only sleep and draw a small random tensor, and 64 of them from a forkserver that has
    not imported torch (a test process's may have been started without it) would each import
    it, minutes on 2 cores."""
    return _TorchvisionLoader(SleepImages(images, seconds_per_image, side, jitter, seed),
                              batch_size, workers, "cpu", seed=seed,
                              context=multiprocessing.get_context("fork"))


class LateStart:
    """A loader whose taker pauses once, for `seconds` before its batch number `after`: every
    worker refills its queue meanwhile, as when an H200's warm round began two of a worker's
    batch times after the drain, and every queued batch was ready before the timed round
    asked for it."""

    def __init__(self, loader: Loader, after: int, seconds: float) -> None:
        self.loader, self.after, self.seconds = loader, after, seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def stream(self) -> Iterator[Any]:
        for i, batch in enumerate(self.loader.stream()):
            if i == self.after:
                time.sleep(self.seconds)
            yield batch

    def __enter__(self) -> LateStart:
        return self

    def __exit__(self, *exc: object) -> None:
        self.loader.close()


def steady_rate(workers: int, seconds_per_image: float) -> float:
    """Images/s that `workers` such workers deliver in steady state: W · b / (b · t)."""
    return max(1, workers) / seconds_per_image


class SleepDevice:
    """A GPU's queue in real time, on a thread: the host queues work and returns at once, the
    device runs it in order (sleeping), an event is stamped when the device reaches it, and a
    sync waits for everything queued. The host's own work per step (taking a batch, launching)
    then overlaps the device's, as on a GPU, instead of adding to it."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, DeviceEvent):
                item.at = time.perf_counter()
                item.done.set()
            else:
                time.sleep(item)

    def launch(self, seconds: float) -> None:
        self._queue.put(seconds)

    def event(self) -> DeviceEvent:
        mark = DeviceEvent()
        self._queue.put(mark)
        return mark

    def sync(self) -> None:
        self.event().done.wait()


class DeviceEvent:
    """A point in a SleepDevice's queue: `at` is when the device reached it."""

    def __init__(self) -> None:
        self.done, self.at = threading.Event(), 0.0


class SleepMeter(Meter):
    """A Meter whose device is a SleepDevice: events and syncs as on CUDA, the host clock
    (time.perf_counter) for everything else. Whatever device a probe names, this one runs."""

    def __init__(self, device: SleepDevice) -> None:
        super().__init__()
        self.device = device

    def sync(self, device: str) -> None:
        self.device.sync()

    def event(self, device: str) -> DeviceEvent:
        return self.device.event()

    def elapsed(self, start: Any, end: Any) -> float:
        end.done.wait()
        return float(end.at - start.at)

    def step_times(self, step: Callable[[], Any], n: int, device: str) -> list[float]:
        marks = [self.device.event()]
        for _ in range(n):
            step()
            marks.append(self.device.event())
        self.device.sync()
        return [b.at - a.at for a, b in zip(marks, marks[1:], strict=False)]


class SleepTrainer:
    """A trainer whose step takes `step_s` of wall time on any batch: the pipeline probe's
    compute half without a model, so that its accelerator utilisation is known in advance.
    `first_step_s`, when given, is the first step's time instead, as a GPU's allocation and
    cuDNN autotuning make it: the loader's workers fill their prefetch buffer meanwhile. With
    a `device` (a SleepDevice, timed by a SleepMeter) a step is queued there, as on a GPU;
    without one it sleeps on the host."""

    def __init__(self, step_s: float, first_step_s: float | None = None,
                 device: SleepDevice | None = None) -> None:
        self.step_s = step_s
        self.first_step_s = step_s if first_step_s is None else first_step_s
        self.steps = 0
        self.device = device

    def set_synthetic_batch(self, batch: int, image_size: int) -> None:
        return None

    def prepare(self, images: Any, labels: Any) -> Any:
        return images, labels

    def use(self, batch: Any) -> None:
        return None

    def step(self, precision: Any) -> Callable[[], None]:
        def step() -> None:
            seconds = self.step_s if self.steps else self.first_step_s
            self.steps += 1
            if self.device is not None:
                self.device.launch(seconds)
            else:
                time.sleep(seconds)

        return step
