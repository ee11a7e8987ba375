"""How a probe observes a device: CUDA-event timers for GPU work, the host clock for the CPU,
device syncs, per-step times and the allocator's high-water mark.

The CPU path makes no CUDA call at all; the GPU path records events on the current stream, so
no host overhead or queueing delay is counted, and synchronizes on the end event before
reading. Probes reach the device's clock only through a `Meter`, so the simulator
(engine/simulate.py) can replace it with a fake clock and a device profile and run the probes'
own planning at GPU speed on a CPU machine. torch is imported inside the GPU paths only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchbench.core.timing import Clock, Timer, wall_timer


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



def synchronized_wall_timer(devices: list[str], meter: Meter | None = None) -> Timer:
    """Host timer around work spread over several GPUs: synchronize all, time, synchronize all.

    CUDA events belong to one device, so work that runs on several at once is timed on the
    host, with every device synchronized before the clock is read.
    """
    meter = meter or Meter()

    def sync() -> None:
        for d in devices:
            meter.sync(d)

    def timed(fn: Callable[[], Any], inner: int) -> float:
        sync()
        start = meter.clock()
        for _ in range(inner):
            fn()
        sync()
        return meter.clock() - start

    return timed


class Meter:
    """How a probe observes a device: CUDA events and the allocator's statistics on a GPU,
    the clock on the host."""

    def __init__(self, clock: Clock = time.perf_counter) -> None:
        self.clock = clock

    def timer_for(self, device: str) -> Timer:
        return cuda_timer(device) if device.startswith("cuda") else wall_timer(self.clock)

    def sync(self, device: str) -> None:
        """Wait for a GPU's queued work before reading a host clock; nothing on the CPU."""
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)

    def step_times(self, step: Callable[[], Any], n: int, device: str) -> list[float]:
        """Seconds per step for n consecutive steps, with no host sync between them on a GPU
        (one event pair per step, read after the last)."""
        if not device.startswith("cuda"):
            return self.clock_step_times(step, n)
        import torch

        with torch.cuda.device(device):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            events[0].record()
            for i in range(n):
                step()
                events[i + 1].record()
            events[-1].synchronize()
            return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(n)]

    def event(self, device: str) -> Any:
        """A point on the device's queue, recorded now: a CUDA event on a GPU (it completes
        when the work queued before it has run), the clock's reading on the host. Read two
        with `elapsed` once the device is synchronized."""
        if not device.startswith("cuda"):
            return self.clock()
        import torch

        with torch.cuda.device(device):
            mark = torch.cuda.Event(enable_timing=True)
            mark.record()
        return mark

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two events of `event` (the device synchronized after `end`)."""
        if isinstance(start, float):
            return end - start
        return float(start.elapsed_time(end)) / 1e3  # ms -> s

    def clock_step_times(self, step: Callable[[], Any], n: int) -> list[float]:
        """Seconds per step on the host clock: for work that returns when it is done."""
        out = []
        for _ in range(n):
            t0 = self.clock()
            step()
            out.append(self.clock() - t0)
        return out

    def timed_once(self, fn: Callable[[], Any], device: str) -> float:
        """Wall seconds of one synchronized call: what a step costs the budget, first-call
        costs (allocation, kernel selection, cuDNN autotuning) included."""
        self.sync(device)
        t0 = self.clock()
        fn()
        self.sync(device)
        return self.clock() - t0

    def reset_peak_memory(self, device: str) -> None:
        """Start a fresh high-water mark (a failed out-of-memory attempt must not count)."""
        if device.startswith("cuda"):
            import torch

            torch.cuda.reset_peak_memory_stats(device)

    def peak_memory(self, device: str) -> float | None:
        """Bytes the caching allocator held at most since the last reset; None on the CPU,
        where torch tracks no allocator peak."""
        if not device.startswith("cuda"):
            return None
        import torch

        return float(torch.cuda.max_memory_allocated(device))
