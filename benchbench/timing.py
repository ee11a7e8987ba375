"""Timers: a CUDA-event timer for GPU work and a wall-clock timer for the host.

A timer runs `fn` `inner` times back to back and returns the elapsed seconds. The CPU path
makes no CUDA call at all; the GPU path records events on the current stream, so no host
overhead or queueing delay is counted, and synchronizes on the end event before reading.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

Clock = Callable[[], float]


class Timer(Protocol):
    def __call__(self, fn: Callable[[], Any], inner: int) -> float: ...


def wall_timer(clock: Clock = time.perf_counter) -> Timer:
    """Host timer. For work that returns when it is done (CPU tensors, blocking copies)."""

    def timed(fn: Callable[[], Any], inner: int) -> float:
        start = clock()
        for _ in range(inner):
            fn()
        return clock() - start

    return timed


def cuda_timer(device: Any) -> Timer:
    """CUDA-event timer on the current stream of `device`."""
    import torch

    def timed(fn: Callable[[], Any], inner: int) -> float:
        with torch.cuda.device(device):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # ms -> s

    return timed


def timer_for(device: str) -> Timer:
    """The honest timer for a device string: 'cpu' or 'cuda:N'."""
    return cuda_timer(device) if device.startswith("cuda") else wall_timer()


def calibrate_inner(timer: Timer, fn: Callable[[], Any], min_sample_s: float,
                    max_inner: int = 1 << 16) -> int:
    """How many back-to-back calls make one sample last at least min_sample_s.

    Short samples are dominated by timer resolution and launch overhead (pyperf warns about
    values that are too short to time), so small operations are repeated inside a sample.
    """
    inner = 1
    while True:
        elapsed = timer(fn, inner)
        if elapsed >= min_sample_s or inner >= max_inner:
            return inner
        if elapsed <= 0:
            inner *= 10
        else:
            inner = max(inner + 1, math.ceil(inner * 1.2 * min_sample_s / elapsed))
        inner = min(inner, max_inner)


def synchronized_wall_timer(devices: list[str]) -> Timer:
    """Host timer around work spread over several GPUs: synchronize all, time, synchronize all.

    CUDA events belong to one device, so work that runs on several at once is timed on the
    host, with every device synchronized before the clock is read.
    """
    import torch

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)

    def timed(fn: Callable[[], Any], inner: int) -> float:
        sync()
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        return time.perf_counter() - start

    return timed
