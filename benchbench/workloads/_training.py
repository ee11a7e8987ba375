"""What the training probes share: precision set-up, the order and budget of precisions, OOM
back-off, batch search, warm-up and timed steps.

A probe supplies `build(batch, precision) -> step`, a closure that runs one full training step
(forward, backward, optimizer, zero_grad) on synthetic data already on the device. This module
decides which precisions fit the time budget (AMP first on a GPU: it is what buyers compare),
warms each one up within its share of the budget, fits the number of timed steps to what is
left, times the steps (CUDA events on the GPU, no host sync inside the loop; the clock on the
CPU) and turns the step times into measurements: throughput is total work over total time, not
a mean of per-step rates. All timing goes through `ctx.meter`, so simulate.py runs this very
code against a device profile.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from benchbench.core.results import Measurement
from benchbench.probes._devices import failure, fp8_unavailable, is_oom, usable_on
from benchbench.probes.api import ProbeContext, ProbeSkipped, median_of, total_over_time
from benchbench.probes.meter import free_memory

Step = Callable[[], None]
ENERGY_SOURCE = "NVML energy counter"
CPU_PRECISIONS = ("fp32", "amp_bf16")
# The fewest timed steps worth a figure: the warm-up is paid by then, and a median needs two.
MIN_STEPS = 2
# A plan may overrun its share by this factor before the item is skipped instead: shares are
# estimates, and a figure with a few steps is worth more than none.
OVERRUN = 3.0
# On a CPU, one step at the real batch is first judged from a warm step at batch 2: bf16
# without native support can take a minute a step. Only a step that would eat this share of the
# whole remaining budget is skipped that way; a linear scale-up from batch 2 errs high, so the
# real decision is taken from a warm step at the real batch.
CPU_PREVIEW_SHARE = 0.5


@dataclass(frozen=True)
class Precision:
    name: str
    autocast: torch.dtype | None
    tf32: bool
    scaler: bool  # fp16 needs loss scaling; bf16 has fp32's exponent range and does not
    # fp8: the model's Linear layers converted by torchao's float8 training (dynamic,
    # tensor-wise scales), the rest under bf16 autocast; only a workload that knows how to
    # convert its model takes it (the transformer).
    fp8: bool = False


PRECISIONS = {
    "fp32": Precision("fp32", None, False, False),
    "tf32": Precision("tf32", None, True, False),
    # AMP keeps TF32 on for the fp32 ops autocast leaves alone, as AMP training recipes do.
    "amp_bf16": Precision("amp_bf16", torch.bfloat16, True, False),
    "amp_fp16": Precision("amp_fp16", torch.float16, True, True),
    "fp8": Precision("fp8", torch.bfloat16, True, False, fp8=True),
}


def fp8_training_unavailable(dev: str, facts: dict[str, Any] | None) -> str | None:
    """Why fp8 training cannot run on `dev`: no fp8 tensor cores, or no torchao (the [fp8]
    extra); None when it can. The facts may say whether torchao is installed (the
    simulator's do); else it is looked for here."""
    why = fp8_unavailable(dev, facts or {})
    if why:
        return why
    installed = (facts or {}).get("torchao")
    if installed is None and importlib.util.find_spec("torchao") is None:
        return ("torchao is not installed: pip install 'benchbench[fp8]' (torchao's float8 "
                "training)")
    return None


def usable_precisions(dev: str, wanted: tuple[str, ...], notes: list[str],
                      facts: dict[str, Any] | None = None) -> list[str]:
    return usable_on(dev, wanted, CPU_PRECISIONS, ("tf32", "amp_bf16"),
                     "the CPU path trains in fp32 and amp_bf16 only", notes, facts,
                     fp8_training_unavailable)


def precision_order(dev: str, usable: list[str]) -> list[str]:
    """The order precisions are measured in. On a GPU the AMP precisions come first (bf16,
    then fp8 against it, then fp16), then tf32 and fp32: when the budget runs short, the
    figures buyers compare are the ones kept. On a CPU the configured order stands (fp32
    first: bf16 is often emulated)."""
    if dev == "cpu":
        return list(usable)
    rank = {"amp_bf16": 0, "fp8": 1, "amp_fp16": 2, "tf32": 3, "fp32": 4}
    return sorted(usable, key=lambda p: rank.get(p, len(rank)))


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


def search_batch(start: int, fits: Callable[[int], bool], cap: int
                 ) -> tuple[int | None, list[tuple[int, bool]]]:
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


def fits(build: Callable[[int], Step], ctx: ProbeContext, dev: str) -> Callable[[int], bool]:
    """A trial for search_batch: two steps at that batch without running out of memory."""

    def trial(batch: int) -> bool:
        step: Step | None = None
        try:
            step = build(batch)
            step()
            step()
            ctx.meter.sync(dev)
            return True
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            return False
        finally:
            step = None  # noqa: F841 - drop the model and data before the next trial
            free_memory()

    return trial


def plan_steps(est_step_s: float, wanted: int, share_s: float) -> int | None:
    """Timed steps that fit a share of the budget: `wanted`, or fewer when the share is short,
    but never under MIN_STEPS since the warm-up is already paid; None when even MIN_STEPS would
    overrun the share more than OVERRUN times. The one step-planning rule of every training
    probe (resnet50, transformer, pipeline, ddp_scaling)."""
    if est_step_s * MIN_STEPS > OVERRUN * share_s:
        return None
    fit = math.floor(share_s / est_step_s) if est_step_s > 0 else wanted
    return min(wanted, max(MIN_STEPS, fit))


@dataclass(frozen=True)
class WarmUp:
    first_s: float  # the first step, synchronized: allocation, kernel selection, autotuning
    steps: int  # untimed steps run, the first included
    step_s: float  # one more warm, synchronized step: the estimate the timed steps are planned by


def warm_up(step: Step, ctx: ProbeContext, dev: str, share_s: float) -> WarmUp:
    """Warm-up steps, by count (policy.warmup_steps) and by seconds (policy.warmup_s), but
    never past half of `share_s` once the first step has run: the budget's timed steps matter
    more than a long warm-up. Then one synchronized step gives the estimate."""
    meter = ctx.meter
    t0 = ctx.clock()
    first = meter.timed_once(step, dev)
    done = 1
    while (done < ctx.policy.warmup_steps or ctx.clock() - t0 < ctx.policy.warmup_s) and \
            ctx.clock() - t0 < share_s / 2:
        step()
        # A GPU step returns once queued: without a sync the clock read above runs ahead of
        # the device, and the warm-up overruns its share by what is still queued.
        meter.sync(dev)
        done += 1
    return WarmUp(first, done, meter.timed_once(step, dev))


def monotonic_span(ctx: ProbeContext, since: float) -> tuple[float, float]:
    """(start, end) on time.monotonic of the span from `since` (on ctx.clock) to now: the
    clock the parent's telemetry sampler stamps its samples with."""
    now, mono = ctx.clock(), time.monotonic()
    return mono - (now - since), mono


def step_measurements(key: dict[str, Any], times: list[float], work_per_step: float,
                      unit: str, context: dict[str, Any]) -> list[Measurement]:
    """throughput (total work / total time, per-step rates as samples) and step_time."""
    total = sum(times)
    return [
        total_over_time("throughput", key, work_per_step * len(times) / total,
                        [work_per_step / t for t in times], unit, context),
        median_of("step_time", key, times, "s", higher_is_better=False, context=context),
    ]


@dataclass(frozen=True)
class TrainingJob:
    """What a training probe asks of run_training: where, in which precisions, at which batch,
    how many steps, and how a step's work is counted."""

    dev: str  # "cpu" or "cuda:N"
    precisions: tuple[str, ...]
    batch_size: int | str  # an integer, or "auto" to search for the largest that fits
    default_batch: int  # where the "auto" search starts, and the CPU's batch for "auto"
    batch_cap: int  # the "auto" search stops here
    steps: int  # timed steps wanted per precision
    work_per_sample: float  # 1 image, or seq_len tokens
    unit: str  # "samples/s" or "tokens/s"
    key: Callable[[str], dict[str, Any]]  # the measurement key for a precision
    context: dict[str, Any] = field(default_factory=dict)
    min_timed_s: float = 0.0  # the timed steps of a precision last at least this long


# The first precision's start pays what a process pays once (CUDA's and cuDNN's libraries and
# kernels loaded: an H200's first ResNet50 step took 9.3 s, a later precision's 2.7-4.0 s): a
# later one is expected to start in this share of it until one has been seen.
FIRST_START_SHARE = 0.5


@dataclass
class _Seen:
    """What earlier precisions cost: the next one is only started when it can finish."""

    starts: list[float] = field(default_factory=list)  # build + first step, each precision
    step_s: float = 0.0  # the slowest warm step

    @property
    def first_s(self) -> float:
        """What the next precision's start is expected to take: the longest start after the
        first, else the first's FIRST_START_SHARE."""
        if len(self.starts) > 1:
            return max(self.starts[1:])
        return self.starts[0] * FIRST_START_SHARE if self.starts else 0.0

    @property
    def need_s(self) -> float:
        """A start, the estimate step and MIN_STEPS timed steps at the slowest pace seen so
        far: a lower bound, so a slower precision may still run short (plan_steps trims it)."""
        return self.first_s + (1 + MIN_STEPS) * self.step_s

    def blocks(self, remaining_s: float) -> bool:
        return bool(self.first_s) and self.need_s > remaining_s


def _cpu_preview(build: Callable[[int], Step], batch: int, ctx: ProbeContext) -> float:
    """Seconds for one step at `batch`, scaled up from the faster of two warm steps at batch 2
    (BatchNorm needs more than one value per channel)."""
    small = min(2, batch)
    step = build(small)
    step()  # the first call allocates and picks kernels
    warm = min(ctx.meter.timed_once(step, "cpu") for _ in range(2))
    return warm * batch / small


def run_training(ctx: ProbeContext, job: TrainingJob, build: Callable[[int, Precision], Step]
                 ) -> tuple[list[Measurement], list[str]]:
    """Measure each usable precision that fits the budget; returns (measurements, notes on
    what was skipped and why)."""
    dev = job.dev
    notes: list[str] = []
    ctx.meter.init(dev)  # before the first peak-memory reset: CUDA raises until initialised
    read_energy = ctx.meter.energy_reader(dev, ctx.gpu_uuid(dev))
    order = precision_order(dev, usable_precisions(dev, job.precisions, notes, ctx.facts))
    out: list[Measurement] = []
    seen = _Seen()
    for i, name in enumerate(order):
        ctx.progress(name, i, len(order))
        remaining = ctx.budget.remaining()
        if seen.blocks(remaining):
            notes.append(f"{name} skipped, because {remaining:.3g} s of the time budget were "
                         f"left, under the ~{seen.need_s:.3g} s its start ({seen.first_s:.3g} s, "
                         f"as the precisions before it started) and {1 + MIN_STEPS} steps at "
                         "their slowest pace would take")
            continue
        p = PRECISIONS[name]
        ctx.meter.set_tf32(p.tf32)

        def build_at(b: int, p: Precision = p) -> Step:
            return build(b, p)

        batch = job.default_batch if job.batch_size == "auto" else int(job.batch_size)
        extra: dict[str, Any] = {}
        if job.batch_size == "auto" and dev == "cpu":
            notes.append("batch_size=auto on cpu: no search, because a CPU never reports out "
                         f"of memory (it swaps or is killed); used {job.default_batch}")
        elif job.batch_size == "auto":
            try:
                found, tried = search_batch(job.default_batch, fits(build_at, ctx, dev),
                                            job.batch_cap)
            except ProbeSkipped:
                raise
            except Exception as exc:  # this precision fails; the others are still measured
                notes.append(f"{name} on {dev} skipped, because {failure(exc)}")
                continue
            extra["batch_search"] = [{"batch": b, "fits": ok} for b, ok in tried]
            if found is None:
                notes.append(f"{name} skipped, because even a batch of 1 does not fit")
                continue
            batch = found
        if dev == "cpu" and name != "fp32":
            try:
                est = _cpu_preview(build_at, batch, ctx)
            except ProbeSkipped:
                raise
            except Exception:
                # Unknown: out of memory, the back-off below finds a batch that fits; any
                # other failure recurs there, and is noted there.
                est = 0.0
            free_memory()
            if est > CPU_PREVIEW_SHARE * ctx.budget.remaining():
                notes.append(f"{name} skipped, because one step at batch {batch} would take "
                             f"~{est:.3g} s (scaled from warm steps at batch 2), more than "
                             f"half of the {ctx.budget.remaining():.3g} s left")
                continue
        left = len(order) - i
        window: list[tuple[float, float]] = []  # the timed steps on the telemetry's clock
        energy: list[dict[str, Any]] = []  # the energy counter over them, where NVML reads it
        allowed: list[float] = []  # the most seconds the timed steps could take, per attempt

        def attempt(b: int, build_at: Callable[[int], Step] = build_at, left: int = left,
                    first: bool = not out, window: list[tuple[float, float]] = window,
                    energy: list[dict[str, Any]] = energy, allowed: list[float] = allowed
                    ) -> tuple[list[float] | None, WarmUp, float]:
            ctx.meter.reset_peak_memory(dev)  # a failed, larger attempt must not count
            t0 = ctx.clock()
            step = build_at(b)
            built_s = ctx.clock() - t0
            warm = warm_up(step, ctx, dev, ctx.budget.remaining() / left)
            # The precisions still to come will each pay a start like this one (build, first
            # step, cuDNN's autotuning): keep that back before sharing out the timed steps.
            this = built_s + warm.first_s
            starts = (left - 1) * (max(seen.first_s, this) if seen.starts
                                   else this * FIRST_START_SHARE)
            remaining = ctx.budget.remaining()
            wanted = job.steps
            if job.min_timed_s and warm.step_s > 0:
                wanted = max(wanted, math.ceil(job.min_timed_s / warm.step_s))
            n = plan_steps(warm.step_s, wanted, max(0.0, remaining - starts) / left)
            if n is None:  # the later ones will not fit anyway: do not keep time for them
                n = plan_steps(warm.step_s, wanted, remaining / left)
            if n is None and first:
                # The first figure is the core one: it may take what the later precisions
                # were to share, and they are skipped for it.
                n = plan_steps(warm.step_s, job.steps, ctx.budget.remaining())
            if n is None and first and MIN_STEPS * warm.step_s <= ctx.budget.total_s:
                # ... and with its warm-up paid, its fewest steps run where they fit in the
                # whole share, past what the warm-up left: a quick CPU run's resnet50 skipped
                # itself when a slow moment made its step 0.51 s where 0.3 s is usual.
                n = MIN_STEPS
            if n is None:  # what the most generous rule above would have let the steps take
                allowed.append(max(OVERRUN * remaining / left, ctx.budget.total_s) if first
                               else OVERRUN * remaining / left)
                return None, warm, built_s
            t0 = ctx.clock()
            before = read_energy() if read_energy else None
            times = ctx.meter.step_times(step, n, dev)
            after = read_energy() if read_energy else None
            window.append(monotonic_span(ctx, t0))
            if before is not None and after is not None and after >= before:
                energy.append({"J": round(after - before, 3), "s": round(ctx.clock() - t0, 4),
                               "samples": job.work_per_sample * b * n, "source": ENERGY_SOURCE})
            return times, warm, built_s

        try:
            (times, warm, built_s), used, failed = with_backoff(batch, attempt)
        except ProbeSkipped:
            raise
        except Exception as exc:
            # One precision that fails (torchao's float8 conversion, a kernel this torch lacks)
            # stays local: the figures before it stay, the ones after it are still measured.
            # KeyboardInterrupt and the runner's signals are not Exceptions, and pass.
            notes.append(f"{name} skipped, because even a batch of 1 does not fit in memory"
                         if is_oom(exc) else f"{name} on {dev} skipped, because {failure(exc)}")
            continue
        finally:
            free_memory()
        seen.starts.append(built_s + warm.first_s)
        seen.step_s = max(seen.step_s, warm.step_s)
        if times is None:
            notes.append(f"{name} skipped, because its {MIN_STEPS} fewest timed steps at "
                         f"~{warm.step_s:.3g} s each (its warm step) would take "
                         f"~{MIN_STEPS * warm.step_s:.3g} s, more than the {allowed[-1]:.3g} s "
                         "its share of the time budget allows")
            continue
        ctx_m = {**job.context, **extra, "batch": used, "oom_backoff": failed,
                 "steps": len(times), "warmup_steps": warm.steps,
                 # When the timed steps ran, on time.monotonic as the run's telemetry stamps
                 # its samples: the energy analysis integrates power over these seconds only.
                 "timed_monotonic_s": [round(x, 4) for x in window[-1]],
                 # The GPU's energy counter read as the timed steps began and as they ended:
                 # their joules, the wall seconds between the reads and the samples (images
                 # or tokens) the steps processed.
                 **({"timed_energy": energy[-1]} if energy else {}),
                 "first_step_s": warm.first_s, "tf32_enabled": p.tf32,
                 "autocast": str(p.autocast) if p.autocast else None, "grad_scaler": p.scaler,
                 "timed_s": round(sum(times), 4)}
        bench = ctx.meter.cudnn_benchmark(dev)
        if bench is not None:
            ctx_m["cudnn_benchmark"] = bench
        out += step_measurements(job.key(name), times, job.work_per_sample * used, job.unit,
                                 ctx_m)
        peak = ctx.meter.peak_memory(dev)
        if peak is not None:
            out.append(Measurement(
                metric="peak_memory", key=job.key(name), value=peak, unit="B", statistic="max",
                samples=[peak], higher_is_better=False,
                context={**ctx_m, "allocator": "torch.cuda.max_memory_allocated",
                         "peak_reserved_B": ctx.meter.peak_reserved(dev)}))
    ctx.meter.set_tf32(False)
    ctx.progress("done", len(order), len(order))
    if dev == "cpu" and out:
        notes.append("peak_memory on cpu skipped, because torch tracks allocator peaks on CUDA "
                     "only")
    return out, notes
