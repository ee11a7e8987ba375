"""What the training probes share: precision set-up, OOM back-off, batch search, timed steps.

A probe supplies `build(batch, precision) -> step`, a closure that runs one full training step
(forward, backward, optimizer, zero_grad) on synthetic data already on the device. This module
warms it up, fits the number of timed steps to the time budget, times each step (CUDA events
on the GPU, no host sync inside the loop; perf_counter on the CPU) and turns the step times into
measurements: throughput is total work over total time, not a mean of per-step rates.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchbench.probe import ProbeContext
from benchbench.results import Measurement
from benchbench.stats import median
from benchbench.workloads._devices import apply_tf32, is_oom, sync, usable_on

Step = Callable[[], None]
CPU_PRECISIONS = ("fp32", "amp_bf16")


@dataclass(frozen=True)
class Precision:
    name: str
    autocast: torch.dtype | None
    tf32: bool
    scaler: bool  # fp16 needs loss scaling; bf16 has fp32's exponent range and does not


PRECISIONS = {
    "fp32": Precision("fp32", None, False, False),
    "tf32": Precision("tf32", None, True, False),
    # AMP keeps TF32 on for the fp32 ops autocast leaves alone, as AMP training recipes do.
    "amp_bf16": Precision("amp_bf16", torch.bfloat16, True, False),
    "amp_fp16": Precision("amp_fp16", torch.float16, True, True),
}


def usable_precisions(dev: str, wanted: tuple[str, ...], notes: list[str]) -> list[str]:
    return usable_on(dev, wanted, CPU_PRECISIONS, ("tf32", "amp_bf16"),
                     "the CPU path trains in fp32 and amp_bf16 only", notes)


def make_step(loss_fn: Callable[[], torch.Tensor], optimizer: torch.optim.Optimizer,
              precision: Precision, dev: str) -> Step:
    device_type = "cuda" if dev.startswith("cuda") else "cpu"
    scaler = torch.amp.GradScaler(device_type) if precision.scaler else None

    def step() -> None:
        with torch.autocast(device_type, dtype=precision.autocast or torch.float32,
                            enabled=precision.autocast is not None):
            loss = loss_fn()
        if scaler is not None:
            # GradScaler.step reads found_inf on the host: that sync is part of fp16 training's
            # real cost. A skipped step (inf gradients) still counts as a step.
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def time_steps(step: Step, n: int, dev: str) -> list[float]:
    """Seconds per step for n consecutive steps, with no host sync between them on a GPU."""
    if not dev.startswith("cuda"):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            out.append(time.perf_counter() - t0)
        return out
    with torch.cuda.device(dev):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        events[0].record()
        for i in range(n):
            step()
            events[i + 1].record()
        events[-1].synchronize()
        return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(n)]


def with_backoff(batch: int, attempt: Callable[[int], Any]) -> tuple[Any, int, list[int]]:
    """Run attempt(batch), halving the batch on out-of-memory. Returns (result, batch, the
    batches that did not fit). Raises the last OOM when even a batch of 1 does not fit."""
    failed: list[int] = []
    while True:
        try:
            return attempt(batch), batch, failed
        except RuntimeError as exc:
            if not is_oom(exc) or batch == 1:
                raise
        failed.append(batch)
        batch //= 2
        free_memory()


def search_batch(start: int, fits: Callable[[int], bool], cap: int) -> tuple[int | None, list]:
    """The largest power of two that fits: double from `start` until a batch fails (or `cap`),
    halving below `start` when it fails already. Returns (batch or None, [(batch, fits)])."""
    tried: list[tuple[int, bool]] = []
    b, best = start, None
    while b <= cap:
        ok = fits(b)
        tried.append((b, ok))
        if not ok:
            break
        best, b = b, b * 2
    b = start // 2
    while best is None and b >= 1:
        ok = fits(b)
        tried.append((b, ok))
        best = b if ok else None
        b //= 2
    return best, tried


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def fits(build: Callable[[int], Step], dev: str) -> Callable[[int], bool]:
    """A trial for search_batch: two steps at that batch without running out of memory."""

    def trial(batch: int) -> bool:
        try:
            step = build(batch)
            step()
            step()
            sync(dev)
            return True
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            return False
        finally:
            step = None  # noqa: F841 - drop the model and data before the next trial
            free_memory()

    return trial


def plan_steps(ctx: ProbeContext, est_step_s: float, wanted: int, items_left: int) -> int | None:
    """Timed steps that fit this item's share of the budget: `wanted`, or fewer when the
    budget is short, but never under 2 since the warm-up is already paid; None when even 2
    would overrun the share by more than 3x."""
    share = ctx.budget.remaining() / max(1, items_left)
    if est_step_s * 2 > 3 * share:
        return None
    fit = math.floor(share / est_step_s) if est_step_s > 0 else wanted
    return min(wanted, max(2, fit))


def warm_up(step: Step, ctx: ProbeContext, dev: str) -> float:
    """Warm-up steps (by count, then by seconds); returns the time of one synchronized step."""
    t0 = time.perf_counter()
    done = 0
    while done < ctx.policy.warmup_steps or time.perf_counter() - t0 < ctx.policy.warmup_s:
        step()
        done += 1
    sync(dev)
    t1 = time.perf_counter()
    step()
    sync(dev)
    return time.perf_counter() - t1


def step_measurements(key: dict[str, Any], times: list[float], work_per_step: float,
                      unit: str, context: dict[str, Any]) -> list[Measurement]:
    """throughput (total work / total time, per-step rates as samples) and step_time."""
    total = sum(times)
    return [
        Measurement("throughput", key, work_per_step * len(times) / total, unit,
                    "total_over_time", [work_per_step / t for t in times], True, context),
        Measurement("step_time", key, median(times), "s", "median", times, False, context),
    ]


def peak_memory(key: dict[str, Any], dev: str, context: dict[str, Any]) -> Measurement:
    value = float(torch.cuda.max_memory_allocated(dev))
    return Measurement("peak_memory", key, value, "B", "max", [value], False,
                       {**context, "allocator": "torch.cuda.max_memory_allocated"})


def _cpu_estimate(build: Callable[[int], Step], batch: int) -> float:
    """Seconds for one step at `batch`, scaled from one step at batch 2 (BatchNorm needs more
    than one value per channel). CPU steps are synchronous and slow (bf16 without native
    support can take a minute a step), so this cheap look decides whether the full batch fits
    the budget before paying for it. Per-sample cost falls with batch, so it errs high."""
    small = min(2, batch)
    step = build(small)
    step()  # first call allocates and picks kernels
    t0 = time.perf_counter()
    step()
    return (time.perf_counter() - t0) * batch / small


def run_training(ctx: ProbeContext, dev: str, precisions: tuple[str, ...],
                 batch_size: int | str, steps: int, build: Callable[[int, Precision], Step],
                 key_for: Callable[[str], dict[str, Any]], work_per_sample: float, unit: str,
                 batch_cap: int, default_batch: int,
                 context: dict[str, Any]) -> tuple[list[Measurement], list[str]]:
    """Measure each usable precision; returns (measurements, notes on what was skipped)."""
    notes: list[str] = []
    usable = usable_precisions(dev, precisions, notes)
    out: list[Measurement] = []
    for i, name in enumerate(usable):
        ctx.progress(name, i, len(usable))
        p = PRECISIONS[name]
        apply_tf32(p.tf32)
        items_left = len(usable) - i

        def build_at(b: int, p: Precision = p) -> Step:
            return build(b, p)

        batch: int | None = default_batch if batch_size == "auto" else int(batch_size)
        extra: dict[str, Any] = {}
        if batch_size == "auto" and dev == "cpu":
            notes.append("batch_size=auto on cpu: no search, because a CPU never reports out "
                         f"of memory (it swaps or is killed); used {default_batch}")
        elif batch_size == "auto":
            batch, tried = search_batch(default_batch, fits(build_at, dev),
                                        batch_cap)
            extra["batch_search"] = [{"batch": b, "fits": ok} for b, ok in tried]
            if batch is None:
                notes.append(f"{name} skipped, because even a batch of 1 does not fit")
                continue
        if dev == "cpu":
            try:
                est = _cpu_estimate(build_at, batch)
            except RuntimeError as exc:
                if not is_oom(exc):
                    raise
                est = 0.0  # unknown: the back-off below finds a batch that fits
            free_memory()
            # 3x slack: the batch-2 estimate scales linearly and so errs high.
            if est * (ctx.policy.warmup_steps + ctx.policy.min_repeats + 1) > 3 * (
                    ctx.budget.remaining() / items_left):
                notes.append(f"{name} skipped, because one step at batch {batch} would take "
                             f"~{est:.3g} s, beyond its time budget")
                continue
        else:
            torch.cuda.reset_peak_memory_stats(dev)

        def attempt(b: int, build_at: Callable[[int], Step] = build_at,
                    items_left: int = items_left) -> Any:
            step = build_at(b)
            est = warm_up(step, ctx, dev)
            n = plan_steps(ctx, est, steps, items_left)
            return (None if n is None else time_steps(step, n, dev)), est

        try:
            (times, est), used, failed = with_backoff(batch, attempt)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"{name} skipped, because even a batch of 1 does not fit in memory")
            continue
        finally:
            free_memory()
        if times is None:
            notes.append(f"{name} skipped, because one step takes ~{est:.3g} s, beyond its "
                         "time budget")
            continue
        ctx_m = {**context, **extra, "batch": used, "oom_backoff": failed,
                 "steps": len(times), "warmup_steps": ctx.policy.warmup_steps,
                 "tf32_enabled": p.tf32, "autocast": str(p.autocast) if p.autocast else None,
                 "grad_scaler": p.scaler}
        out += step_measurements(key_for(name), times, work_per_sample * used, unit, ctx_m)
        if dev != "cpu":
            out.append(peak_memory(key_for(name), dev, ctx_m))
    apply_tf32(False)
    ctx.progress("done", len(usable), len(usable))
    if dev == "cpu" and out:
        notes.append("peak_memory on cpu skipped, because torch tracks allocator peaks on CUDA "
                     "only")
    return out, notes
