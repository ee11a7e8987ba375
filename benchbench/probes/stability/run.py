"""Probe `stability`: one fixed kernel, back to back, for `duration_s`, in ~100 ms windows.

A median hides a GPU that spent a fifth of the run power-capped, or a VM whose neighbour woke
up. This probe keeps every window's throughput (FLOP/s) with its start time on the monotonic
clock that the run's telemetry also uses, so the analysis (analysis/stability.py) can line the
slow windows up with the clocks, power, temperature and throttle reasons of the same moments
and judge: stable, steady at its power limit, throttling or noisy. Where NVML reads the GPU,
each window also keeps the SM clock it ran at, so its throughput per GHz can be told apart
from the clock's moves.

The kernel is the matmul the matmul probe found best (its peak size in the dtype), so the
figure is the sustained version of that ceiling. Each window ends with a device sync: on a GPU
that costs one launch gap (microseconds) per 100 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from benchbench.analysis.window_stats import summarize
from benchbench.core.results import Measurement
from benchbench.core.stats import median
from benchbench.probes._devices import usable_on
from benchbench.probes.api import (
    SM_CLOCK_READ,
    ProbeContext,
    ProbeOutput,
    ProbeSkipped,
    resolved,
)
from benchbench.probes.stability.config import StabilityConfig

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FALLBACK_SIZE = {"cuda": 8192, "cpu": 512}


def chosen_size(cfg: StabilityConfig, previous: dict[str, Any], device: str, dtype: str
                ) -> tuple[int, str]:
    """(n, why): the config's size, else where the matmul probe peaked in this dtype on the
    first device, else a size that fills the device."""
    if cfg.size:
        return cfg.size, "config"
    for m in (previous.get("matmul") or {}).get("measurements", []):
        if m["metric"] == "peak_flops" and m["key"].get("dtype") == dtype and \
                str(m["key"].get("device")) in ("cpu", "cuda:0"):
            return int(m["context"]["best_size"]), "the matmul probe's best size"
    return FALLBACK_SIZE["cuda" if device.startswith("cuda") else "cpu"], "default"


# Work queued between two syncs of the warm-up: enough that a sync (microseconds) costs nothing,
# little enough that the warm-up ends within this much of its deadline.
WARMUP_SYNC_S = 0.02


def warm_up(ctx: ProbeContext, step: Callable[[], Any], dev: str, seconds: float,
            calls: int) -> int:
    """Calls back to back for `seconds`, and at least `calls` of them, synchronising every
    WARMUP_SYNC_S of work. A GPU call returns once it is queued: an unsynchronised loop queues
    about a thousand matmuls in half a second of host time, and the sync after it then waits
    1.4 s at n = 8192, 11 s at 16384, all taken from the timed windows. Returns the calls."""
    deadline = ctx.clock() + seconds
    done, batch = 0, 1
    while True:
        t = ctx.clock()
        for _ in range(batch):
            step()
        ctx.meter.sync(dev)
        done += batch
        spent = ctx.clock() - t
        if done >= calls and ctx.clock() >= deadline:
            return done
        # Grow towards WARMUP_SYNC_S of work, at most 4x a time (the first calls are slow).
        batch = min(4 * batch, max(1, round(batch * WARMUP_SYNC_S / spent))) if spent > 0 \
            else 4 * batch


def timed_seconds(ctx: ProbeContext, cfg: StabilityConfig, notes: list[str]) -> float:
    """Seconds of windows: duration_s, or what the budget has left for them (with a note);
    ProbeSkipped when that is under ten windows."""
    duration = resolved(cfg.duration_s, "duration_s")
    seconds = min(duration, 0.85 * ctx.budget.remaining())
    if seconds < 10 * cfg.window_s:
        why = ("duration_s" if seconds == duration else
               f"the {ctx.budget.remaining():.1f} s left of the time budget")
        raise ProbeSkipped(f"{seconds:.2g} s ({why}) is too little for ten {cfg.window_s:g} s "
                           "windows")
    if seconds < duration:
        notes.append(f"ran {seconds:.1f} s of the {duration:g} s asked, because the time "
                     "budget ran short")
    return seconds


def windows(ctx: ProbeContext, step: Callable[[], Any], dev: str, seconds: float,
            window_s: float, clocks: list[float | None] | None = None
            ) -> tuple[list[float], list[float]]:
    """(window start times on the monotonic clock, seconds per call in each window): calls
    back to back, a sync closing each window, until `seconds` have passed. Where NVML reads
    the GPU's SM clock, `clocks` gets each window's: the mean of a reading as it began and one
    as it ended, outside its timing (None where a read failed)."""
    read = ctx.meter.sm_clock_reader(dev, ctx.gpu_uuid(dev))
    calls, spent = 1, 0.0
    while calls < 1 << 20:  # calls per window, from a batch of calls long enough to time
        ctx.meter.sync(dev)
        t = ctx.clock()
        for _ in range(calls):
            step()
        ctx.meter.sync(dev)
        spent = ctx.clock() - t
        if spent >= window_s / 4:
            break
        calls *= 2
    calls = max(1, round(calls * window_s / max(spent, 1e-9)))
    origin_mono, origin = time.monotonic(), ctx.clock()
    starts, per_call_s = [], []
    while ctx.clock() - origin < seconds:
        before = read() if read else None
        t0 = ctx.clock()
        for _ in range(calls):
            step()
        ctx.meter.sync(dev)
        t1 = ctx.clock()
        after = read() if read else None
        starts.append(origin_mono + (t0 - origin))
        per_call_s.append((t1 - t0) / calls)
        if read is not None and clocks is not None:
            clocks.append(None if before is None or after is None else (before + after) / 2)
        ctx.progress(f"{len(starts)} windows", min(int(t1 - origin), int(seconds)),
                     int(seconds) or 1)
    return starts, per_call_s


def run(ctx: ProbeContext, cfg: StabilityConfig) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    notes: list[str] = []
    wanted = resolved(cfg.dtype, "dtype")
    if not usable_on(dev, (wanted,), ("fp32", "bf16"), ("bf16",),
                     "the CPU path measures fp32 and bf16", notes, ctx.facts):
        raise ProbeSkipped(notes[-1].split("because ", 1)[-1])
    n, why = chosen_size(cfg, ctx.inputs.previous, dev, wanted)
    ctx.meter.set_tf32(False)

    # Set-up: random operands (never zeros), the output preallocated.
    dtype = TORCH_DTYPES[wanted]
    gen = torch.Generator(device=dev).manual_seed(n)
    a, b = (torch.randn(n, n, device=dev, dtype=dtype, generator=gen) for _ in range(2))
    c = torch.empty(n, n, device=dev, dtype=dtype)

    def step() -> None:
        torch.mm(a, b, out=c)

    # Warm-up: clocks ramp and caches fill before the first window counts.
    ctx.progress("warm-up", 0, 1)
    warm_up(ctx, step, dev, cfg.warmup_s or 0.0, cfg.warmup_steps)

    # The timed windows, within the budget that is left.
    seconds = timed_seconds(ctx, cfg, notes)
    clocks: list[float | None] = []
    starts, per_call_s = windows(ctx, step, dev, seconds, cfg.window_s, clocks)

    # Measurements: every window's FLOP/s kept, with its start for the analysis.
    flops = 2.0 * n**3
    rates = [flops / s for s in per_call_s]
    shape = summarize([(t - starts[0], r) for t, r in zip(starts, rates, strict=True)])
    key = {"device": dev, "dtype": wanted, "size": n}
    context: dict[str, Any] = {
        "window_s": cfg.window_s, "seconds": round(seconds, 3), "size_chosen_by": why,
        "t0_monotonic": starts[0], "window_starts_s": [round(t - starts[0], 4) for t in starts],
        **{k: shape[k] for k in ("cv", "worst_1pct_ratio", "drift", "drops", "n_windows")}}
    if clocks:  # the analysis divides each window by it (analysis/stability_clock.py)
        context["window_sm_clock_Hz"] = clocks
        context["window_sm_clock_read"] = SM_CLOCK_READ
    if dev != "cpu":
        context["gpu_name"] = ctx.meter.device_name(dev)
    m = Measurement(metric="sustained_flops", key=key, value=median(rates), unit="FLOP/s",
                    statistic="median", samples=rates, higher_is_better=True, context=context)
    return ProbeOutput([m], notes=notes, params={"size": n, "seconds": round(seconds, 3)})
