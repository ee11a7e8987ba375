"""How a probe observes and sets up a device: CUDA-event timers for GPU work, the host clock
for the CPU, device syncs, per-step times, CUDA's initialisation, the precision modes (TF32 for
matmuls and cuDNN convolutions, cuDNN's autotuner), host-to-device copies on a side stream, the
allocator's cache and its high-water marks (allocated and reserved), and garbage collection kept
off the imports' objects.

The CPU path makes no CUDA call at all; the GPU path records events on the current stream, so
no host overhead or queueing delay is counted, and synchronizes on the end event before
reading. Probes reach the device's clock and state only through a `Meter` (and the stateless
helpers of probes/_devices.py), so the simulator (engine/sim_device.py) can replace it with a
fake clock and a device profile, keep CUDA's rules, and run the probes' own planning at GPU
speed on a CPU machine. tests/invariants/test_device_layer.py keeps every other module off
torch.cuda and torch.backends. torch is imported inside the GPU paths only.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from benchbench.core.timing import Clock, Timer, wall_timer

T = TypeVar("T")

# torch.cuda._sleep counts GPU cycles; at the highest data-center clock (~2 GHz) a cycle is
# shortest, so this rate makes a hold at least as long as asked on any GPU.
SLEEP_HZ = 2e9


def can_hold_device() -> bool:
    """Whether this torch can queue a device busy-wait (torch.cuda._sleep, a private API)."""
    import torch

    return hasattr(torch.cuda, "_sleep")


def cuda_timer(device: Any, hold_s: float = 0.0) -> Timer:
    """CUDA-event timer on the current stream of `device`. With `hold_s`, a device busy-wait
    of that long is queued first (stas00's all_reduce_bench): while the GPU spins, the host
    queues every call, so the events time the calls back to back and not the host's
    per-call overhead."""
    import torch

    def timed(fn: Callable[[], Any], inner: int) -> float:
        with torch.cuda.device(device):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            if hold_s > 0 and can_hold_device():
                torch.cuda._sleep(int(hold_s * SLEEP_HZ))
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


def apply_tf32(enabled: bool) -> None:
    """TF32 on or off for matmuls and cuDNN convolutions alike. cuDNN defaults to TF32, so a
    true fp32 measurement must switch off both.

    torch 2.9 and later keep the mode twice, in the legacy flags and in the per-backend
    fp32_precision, and raise ("mix of the legacy and new APIs") on a legacy read,
    `torch.get_float32_matmul_precision()` or either `allow_tf32`, whenever the two disagree;
    torch.compile's backend makes those reads (pytorch#166387). A legacy setter writes both
    records and an fp32_precision setter only its own, so the mode goes through the legacy
    setters first (their deprecation warning, which torch 2.9 prints once per worker,
    silenced), then through fp32_precision too: the two records agree."""
    import warnings

    import torch

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(TF32|fp32_precision)")
        matmul.allow_tf32 = enabled
        cudnn.allow_tf32 = enabled
    if hasattr(matmul, "fp32_precision"):
        mode = "tf32" if enabled else "ieee"
        matmul.fp32_precision = mode
        cudnn.conv.fp32_precision = mode  # type: ignore[attr-defined]
        cudnn.rnn.fp32_precision = mode  # type: ignore[attr-defined]


def tf32_enabled() -> bool:
    """Whether fp32 matmuls run in TF32: read from fp32_precision where torch has it (a read
    that never raises), from the legacy flag before it."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        return bool(matmul.fp32_precision == "tf32")
    return bool(matmul.allow_tf32)


@contextlib.contextmanager
def long_lived_frozen() -> Iterator[None]:
    """Leave the objects that exist now (in a probe's worker, what its imports made: some
    340,000 objects once torch and torchvision are in) out of every garbage collection until
    the block ends. A full collection then looks only at what the probe made since: on this
    2-core VM, 0.26 s became under 1 ms in ResNet50's and inference's `free_memory`, 0.1 s in
    the transformer's, whose model makes many objects of its own; the full collections Python
    starts itself while a model is built or warmed up shrink alike. A cycle made in
    the block is still collected. At the end the frozen objects return to the oldest
    generation, unless some were frozen already (an outer block, or the caller's own
    `gc.freeze`): Python cannot tell those apart, so all stay frozen."""
    outer = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not outer:
            gc.unfreeze()


def free_memory() -> None:
    """Drop unreachable tensors, and give the caching allocator's free blocks back to the
    driver where CUDA is initialised (never initialising it for that). Fast inside
    `long_lived_frozen`, where every probe runs."""
    gc.collect()
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


class Meter:
    """How a probe observes a device: CUDA events and the allocator's statistics on a GPU,
    the clock on the host."""

    def __init__(self, clock: Clock = time.perf_counter) -> None:
        self.clock = clock
        # the SM clock and energy counter readers opened so far, by GPU UUID (None: NVML
        # cannot read it), so that NVML is opened once per GPU for the probe, not once per
        # measurement
        self._sm_readers: dict[str, Callable[[], float | None] | None] = {}
        self._energy_readers: dict[str, Callable[[], float | None] | None] = {}

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

    def init(self, device: str) -> None:
        """Initialise CUDA before anything reads its state: the allocator's statistics raise
        "Invalid device argument ... did you call init?" until then (pytorch#49952). A no-op
        on the CPU, and once CUDA is initialised."""
        if device.startswith("cuda"):
            import torch

            torch.cuda.init()

    def device_name(self, device: str) -> str | None:
        """The GPU's name as CUDA reports it (initialising CUDA); None on the CPU."""
        if not device.startswith("cuda"):
            return None
        import torch

        self.init(device)
        return str(torch.cuda.get_device_name(device))

    def set_tf32(self, enabled: bool) -> None:
        """TF32 on or off for fp32 matmuls and cuDNN convolutions alike (cuDNN runs TF32
        unless told otherwise, so a true fp32 figure must switch it off)."""
        apply_tf32(enabled)

    def tf32(self) -> bool:
        """Whether fp32 matmuls run in TF32 now."""
        return tf32_enabled()

    def side_stream(self, device: str) -> SideStream:
        """Host-to-device copies overlapped with the compute stream's work (see SideStream)."""
        return SideStream(device)

    def set_cudnn_benchmark(self, device: str, enabled: bool) -> None:
        """cuDNN's autotuner for fixed shapes: it times the candidate kernels on the first
        call of each shape and keeps the fastest. Nothing to do on the CPU."""
        if device.startswith("cuda"):
            import torch

            torch.backends.cudnn.benchmark = enabled

    def cudnn_benchmark(self, device: str) -> bool | None:
        """Whether cuDNN's autotuner is on now; None on the CPU."""
        if not device.startswith("cuda"):
            return None
        import torch

        return bool(torch.backends.cudnn.benchmark)

    def free(self, device: str | None = None) -> None:
        """Drop what Python still holds, and give the caching allocator's free blocks back to
        the driver where CUDA is initialised (so one attempt's cache cannot starve the
        next)."""
        free_memory()

    def reset_peak_memory(self, device: str) -> None:
        """Start fresh high-water marks (a failed out-of-memory attempt must not count).
        CUDA raises here until it is initialised: a probe calls `init` first, and the
        simulator refuses one that does not. On a real GPU the meter initialises anyway,
        since a lent GPU gives one try."""
        if device.startswith("cuda"):
            import torch

            self.init(device)
            torch.cuda.reset_peak_memory_stats(device)

    def sm_clock_reader(self, device: str, uuid: str | None
                        ) -> Callable[[], float | None] | None:
        """A function that reads the GPU's SM clock now (Hz, through NVML, read only), or None
        on the CPU and where NVML cannot read the GPU of this UUID (torch's, from the run's
        facts). Between timed samples it says at what clock each ran: a card held at its power
        limit runs its matmuls at a fraction of its maximum clock."""
        if not device.startswith("cuda") or not uuid:
            return None
        if uuid not in self._sm_readers:
            from benchbench.machine.nvml import sm_clock_reader

            self._sm_readers[uuid] = sm_clock_reader(uuid)
        return self._sm_readers[uuid]

    def energy_reader(self, device: str, uuid: str | None
                      ) -> Callable[[], float | None] | None:
        """A function that reads the GPU's total energy counter now (J, through NVML, read
        only), or None on the CPU and where NVML cannot read it for the GPU of this UUID. Read
        at the start and the end of timed steps, it gives their energy exactly, where NVML's
        power reading is a one-second average that lags the work."""
        if not device.startswith("cuda") or not uuid:
            return None
        if uuid not in self._energy_readers:
            from benchbench.machine.nvml import energy_reader

            self._energy_readers[uuid] = energy_reader(uuid)
        return self._energy_readers[uuid]

    def peak_memory(self, device: str) -> float | None:
        """Bytes the caching allocator handed out at most since the last reset; None on the
        CPU, where torch tracks no allocator peak."""
        if not device.startswith("cuda"):
            return None
        import torch

        return float(torch.cuda.max_memory_allocated(device))

    def peak_reserved(self, device: str) -> float | None:
        """Bytes the caching allocator held from the driver at most since the last reset
        (what the card had to give: allocated plus the cache's rounding and free blocks);
        None on the CPU."""
        if not device.startswith("cuda"):
            return None
        import torch

        return float(torch.cuda.max_memory_reserved(device))


@dataclass
class Staged(Generic[T]):
    """What SideStream.put issued: its result, and the event its copies end at (None where
    nothing was queued: the CPU)."""

    value: T
    done: Any = None


class SideStream:
    """Host-to-device copies on a CUDA stream of their own, overlapped with the compute
    stream, as NVIDIA's DeepLearningExamples' data_prefetcher feeds ResNet50: `put` issues
    the next batch's copy while the current step runs, `take` makes the compute stream wait
    for that copy alone, and tells the caching allocator the tensors are used there, so their
    memory is not handed out again before the step is done with it. The copy must read pinned
    memory to run asynchronously. On the CPU both run the copy function as it is."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._stream: Any = None
        if device.startswith("cuda"):
            import torch

            self._stream = torch.cuda.Stream(device)

    def put(self, copy: Callable[[], T]) -> Staged[T]:
        if self._stream is None:
            return Staged(copy())
        import torch

        with torch.cuda.stream(self._stream):
            value = copy()
            done = torch.cuda.Event()
            done.record(self._stream)
        return Staged(value, done)

    def take(self, staged: Staged[T]) -> T:
        if staged.done is not None:
            import torch

            current = torch.cuda.current_stream(self.device)
            current.wait_event(staged.done)
            for t in _tensors(staged.value):
                t.record_stream(current)
        return staged.value


def _tensors(value: Any) -> list[Any]:
    """The tensors in a value, a tuple or list of them included."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []
