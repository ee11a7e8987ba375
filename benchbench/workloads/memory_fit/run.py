"""Workload `memory_fit`: the largest Llama-style model whose full training step fits here.

For each mode (plain, and with activation checkpointing) it searches the ladder of model sizes
(analysis/memory_fit.py) by real steps: at a candidate size it builds the model on the device,
runs two steps with the real optimizer (AdamW; bf16 autocast over fp32 master weights, or fp16
with GradScaler where the GPU has no bf16), records the allocator's high-water marks (allocated
and reserved), the build's and the steps' times, and frees everything before the next size. On
a GPU the search is a binary search that starts where the closed-form estimate says the
device's memory ends, then a few sizes between the last rung that fits and the first that does
not (the lower rung's width at more layers); an out-of-memory step is an answer, not an error.
On a CPU, which never reports out of memory (the kernel's OOM killer ends the process instead),
it climbs from the small end while a size's estimate stays under a share of the free RAM and
its time fits the budget, and measures the process's peak resident memory instead of the
allocator's.

Every measured point stands beside its closed-form estimate (weights and optimizer states held,
plus the larger end of the backward: working copy and activations by layer shape, or the
gradients) and the measured ÷ estimated ratio. The
search, one attempt's skeleton and the refusals live in search.py, the measurements in
output.py: the simulator runs both with its own build-and-two-steps (engine/sim_models.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

import psutil
import torch

from benchbench.analysis.memory_fit import Shape
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, resolved
from benchbench.workloads._training import PRECISIONS, make_step, usable_precisions
from benchbench.workloads.memory_fit.config import MemoryFitConfig
from benchbench.workloads.memory_fit.output import output
from benchbench.workloads.memory_fit.search import (
    Ran,
    TwoSteps,
    attempt_with,
    estimator,
    refusal,
    search_modes,
)
from benchbench.workloads.models.llama import Llama

# glibc's mallopt and malloc_trim. Freed tensors must go back to the kernel for one size's
# resident memory not to count in the next's: with a fixed mmap threshold every large block
# is mapped on its own and unmapped when freed (a dynamic threshold grows after the first
# large free, and later blocks then stay in the heap).
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_B = 1 << 20


def _release_to_kernel() -> None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_B)
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the baseline is then read as it is
        pass


class _RssPeak:
    """The process's resident memory at its highest while running, sampled every 5 ms: a CPU
    keeps no allocator high-water mark."""

    def __init__(self) -> None:
        _release_to_kernel()
        self.proc = psutil.Process()
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> _RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def device_steps(ctx: ProbeContext, dev: str, seq: int, precision: str) -> TwoSteps:
    """Build a size on `dev` and time two full training steps; on a CPU also the process's
    resident peak (the Meter keeps no allocator peak there). The model's tensors go with the
    inner frame: nothing outlives the call but the times."""

    def two_steps(shape: Shape, mode: str) -> Ran:
        rss = _RssPeak() if dev == "cpu" else None
        with rss or contextlib.nullcontext():
            build_s, step_s = _two_steps(ctx, shape, seq, mode == "checkpointing", precision,
                                         dev)
        return Ran(build_s, step_s, peak_B=None if rss is None else float(rss.peak - rss.base))

    return two_steps


def _two_steps(ctx: ProbeContext, shape: Shape, seq: int, checkpointing: bool, precision: str,
               dev: str) -> tuple[float, list[float]]:
    """The build's seconds and two full training steps' (the first pays start-up)."""
    built: list[torch.nn.Module] = []

    def build() -> None:
        with torch.device(dev):
            built.append(Llama(shape, seq, checkpointing))

    build_s = ctx.meter.timed_once(build, dev)  # the build is real cost: the time refusal uses it
    model = built.pop()
    with torch.device(dev):
        tokens = torch.randint(0, shape.vocab, (1, seq + 1))
    # Fused on every device: on a CPU (torch 2.4 and later) one pass over the parameters,
    # 2-2.5x faster than the foreach default at 125M on 2 cores, and without foreach's
    # parameter-sized temporaries, which the estimate does not count (measured / estimated:
    # 1.10 with foreach, 1.00 fused).
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    x, y = tokens[:, :-1], tokens[:, 1:]
    step = make_step(lambda: model(x, y), opt, PRECISIONS[precision], dev)
    return build_s, [ctx.meter.timed_once(step, dev) for _ in range(2)]


def run(ctx: ProbeContext, cfg: MemoryFitConfig) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    notes: list[str] = []
    precision = resolved(cfg.precision, "precision")
    if not usable_precisions(dev, (precision,), notes, ctx.facts):
        raise ProbeSkipped("; ".join(notes))
    seq = resolved(cfg.seq_len, "seq_len")
    gpu_name = ctx.meter.device_name(dev)
    memory = _memory_total(ctx, dev)
    est = estimator(seq, precision)
    steps = resolved(cfg.bisect_steps, "bisect_steps")
    if dev == "cpu" and steps:
        # The CPU's climb ends at a refusal (time or free RAM), never at an out-of-memory
        # step: there is no measured boundary to narrow, and a guess could wake the OOM killer.
        notes.append(f"bisect_steps={steps} not used on a CPU: its search ends at time or "
                     "free RAM, not at out of memory, so there is no boundary to bisect")
        steps = 0
    points = search_modes(ctx, list(resolved(cfg.ladder, "ladder")),
                          list(resolved(cfg.modes, "modes")),
                          attempt_with(ctx, dev, est, device_steps(ctx, dev, seq, precision)),
                          refusal(ctx, dev, est, cfg.ram_share), dev, est, memory, steps)
    return output(points, dev, seq, precision, memory, notes, gpu_name)


def _memory_total(ctx: ProbeContext, dev: str) -> float | None:
    if dev == "cpu":
        return float(psutil.virtual_memory().total)
    gpus = ctx.facts.get("gpus") or []
    return float(gpus[0]["memory_total"]) if gpus and gpus[0].get("memory_total") else None
