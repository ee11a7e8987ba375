"""Host timing without torch: the clock type, the timer protocol, a wall-clock timer and the
calibration of calls per sample. The GPU timers live with the probes (probes/meter.py).

A timer runs `fn` `inner` times back to back and returns the elapsed seconds.
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


def calibrate_inner(timer: Timer, fn: Callable[[], Any], min_sample_s: float,
                    max_inner: int = 1 << 16) -> int:
    """How many back-to-back calls make one sample last at least min_sample_s.

    Short samples are dominated by timer resolution and launch overhead (pyperf warns about
    values that are too short to time), so small operations are repeated inside a sample.
    Call it after the warm-up: a first call that pays for handle creation or lazy kernel
    loading would make one call look long enough.
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
