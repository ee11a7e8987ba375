"""Probe `matmul`: the highest dense matrix-multiply throughput per dtype, on each GPU or the CPU.

For each device, dtype and size n it times `torch.mm(a, b, out=c)` on random n x n matrices
(2 n^3 FLOP per call) and reports the median FLOP/s with its samples; `peak_flops` is the best
size's median, a burst of about 20 ms a sample. Then the best size runs back to back for
`sustained_s` in ~0.1 s windows: `sustained_flops`, what a GPU at its power limit holds, and
the figure the run is judged by (analysis/matmul_rates.py). fp32 means true fp32: TF32 is
switched off for matmuls and for cuDNN, inside this worker process only.

The first device (GPU 0, or the CPU) sweeps every size; every other GPU is measured at the size
where the first one peaked, per dtype. That keeps an 8-GPU sweep inside its budget, and GPUs
are only ever compared at one size: a spread between GPUs then means the GPUs differ, not the
matrices.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from benchbench.core.results import Measurement
from benchbench.core.timing import Timer
from benchbench.probes._devices import (
    budget_allows,
    failure,
    gpu_indices,
    is_oom,
    usable_on,
)
from benchbench.probes.api import (
    ProbeContext,
    ProbeOutput,
    ProbeSkipped,
    Timed,
    peak_of,
    resolved,
    throughput,
)
from benchbench.probes.matmul.config import MatmulConfig

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
                "fp16": torch.float16, "fp8": torch.bfloat16}  # fp8: its output dtype
CPU_DTYPES = ("fp32", "bf16")  # TF32 is a GPU tensor-core mode; fp16 GEMM on CPU is emulated
# On a GPU the tensor-core dtypes come first: they are the ceiling training runs against, and
# what is left out when the budget runs short should be the slow fp32 path.
GPU_ORDER = {"bf16": 0, "fp8": 1, "fp16": 2, "tf32": 3, "fp32": 4}

# measure(device, dtype, n, items_left, warm) -> the flops measurement at that size; `warm`
# when the device already ran a size at its clocks
Measure = Callable[[str, str, int, int, bool], Measurement]
# sustain(device, dtype, n, est_call_s) -> the sustained_flops measurement at that size
Sustain = Callable[[str, str, int, float], Measurement]
# The sustained run's windows: long enough that a window's closing sync costs nothing, short
# enough that a second gives ten of them to take a median and a spread from.
WINDOW_S = 0.1
MIN_WINDOWS = 3  # a median and a spread, however long a window turned out


def usable_dtypes(dev: str, wanted: tuple[str, ...], notes: list[str],
                  facts: dict[str, Any]) -> list[str]:
    got = usable_on(dev, wanted, CPU_DTYPES, ("tf32", "bf16"),
                    "the CPU path measures fp32 and bf16", notes, facts)
    return got if dev == "cpu" else sorted(got, key=lambda d: GPU_ORDER.get(d, len(GPU_ORDER)))


def _public_scaled_mm() -> tuple[Callable[..., Any], Any] | None:
    """torch.nn.functional.scaled_mm and its TensorWise recipe, where this torch has both (its
    public successor of torch._scaled_mm; the enum has been spelled differently across torch
    versions, so it is taken only where both it and the member are there)."""
    functional = torch.nn.functional
    tensor_wise = getattr(getattr(functional, "ScalingType", None), "TensorWise", None)
    if hasattr(functional, "scaled_mm") and tensor_wise is not None:
        return functional.scaled_mm, tensor_wise
    return None


def fp8_fast_accum() -> bool:
    """Whether the call fp8_mm makes takes `use_fast_accum`, and so runs the fast path: the
    tensor cores accumulate in their own reduced precision instead of promoting to fp32 as
    they go ("enable/disable tensor-core fast accumulation (Hopper-GPUs only)", torch's
    scaled_mm docstring). It is the path torchao's float8 training runs its forward matmul on
    (Float8LinearConfig's gemm_config_output), so the probe's ceiling is the one such a
    matmul meets."""
    public = _public_scaled_mm()
    if public is not None:
        return "use_fast_accum" in inspect.signature(public[0]).parameters
    return any(arg.name == "use_fast_accum"
               for arg in torch.ops.aten._scaled_mm.default._schema.arguments)


def fp8_mm(a: Any, b: Any, scale: Any) -> Callable[[], Any]:
    """A call of the scaled fp8 matmul a @ b with one tensor-wise scale each, bf16 out, on the
    fast-accumulation path where this torch offers it (fp8_fast_accum):
    torch.nn.functional.scaled_mm where this torch has it, else torch._scaled_mm. `b` must be
    column-major, as cuBLASLt wants it (fp8_operands)."""
    fast = fp8_fast_accum()
    public = _public_scaled_mm()
    if public is not None:
        scaled_mm, tensor_wise = public
        flag = {"use_fast_accum": True} if fast else {}  # absent from some versions' API
        return lambda: scaled_mm(a, b, scale, tensor_wise, scale, tensor_wise,
                                 output_dtype=torch.bfloat16, **flag)
    return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale,
                                    out_dtype=torch.bfloat16, use_fast_accum=fast)


def fp8_context() -> dict[str, Any]:
    """What an fp8 measurement's context records of the call: its operands' formats, its
    scaling, and whether it ran the fast-accumulation path."""
    return {"inputs": "e4m3", "output": "bf16", "scaling": "tensor-wise",
            "fast_accum": fp8_fast_accum()}


# cuBLASLt's fp8 GEMM takes sizes in multiples of 16 only, and torch refuses the rest before
# the call ("Expected self.size(1) to be divisible by 16"; "Expected both dimensions of mat2 to
# be divisible by 16": aten/src/ATen/native/cuda/Blas.cpp, torch/_meta_registrations.py
# _check_scaled_mm_sizes). Such a size is skipped with this reason, not rounded: every dtype is
# then compared at the same n.
FP8_MULTIPLE = 16


def unmeasurable(dt: str, n: int) -> str | None:
    """Why dtype `dt` cannot be timed at size n (completes "skipped, because …"); None when
    it can."""
    if dt == "fp8" and n % FP8_MULTIPLE:
        return (f"scaled_mm takes fp8 sizes in multiples of {FP8_MULTIPLE} only (cuBLASLt's fp8 "
                f"GEMM), and {n} is not one")
    return None


def fp8_operands(a: Any, b: Any) -> tuple[Any, Any]:
    """a and b as scaled_mm takes them: e4m3 (values of N(0, 1) are well inside its range, so
    a scale of 1 keeps them), a row-major and b column-major (cuBLASLt's fp8 GEMM runs the
    "TN" layout only). The one place the probe lays fp8 operands out; it runs on meta tensors
    too, where the simulator checks the layout against CUDA's rule."""
    e4m3 = torch.float8_e4m3fn
    return a.to(e4m3), b.to(e4m3).t().contiguous().t()


def run(ctx: ProbeContext, cfg: MatmulConfig) -> ProbeOutput:
    devices = [f"cuda:{i}" for i in gpu_indices(ctx, cfg.devices)] if ctx.device == "cuda" \
        else ["cpu"]
    sizes = sorted(resolved(cfg.sizes, "sizes"))
    wanted = resolved(cfg.dtypes, "dtypes")
    notes: list[str] = []
    dtypes = {dev: usable_dtypes(dev, wanted, notes, ctx.facts) for dev in devices}

    def measure(dev: str, dt: str, n: int, items_left: int, warm: bool) -> Measurement:
        ctx.meter.set_tf32(dt == "tf32")
        try:
            return _measure(ctx, cfg, dev, dt, n, items_left, warm)
        finally:
            if dev != "cpu":
                ctx.meter.free(dev)

    def sustain(dev: str, dt: str, n: int, est_call_s: float) -> Measurement:
        ctx.meter.set_tf32(dt == "tf32")
        try:
            call, context = _operands(ctx, dev, dt, n)
            return sustained(ctx, ctx.meter.timer_for(dev), call, dev, dt, n, est_call_s,
                             resolved(cfg.sustained_s, "sustained_s"), context)
        finally:
            if dev != "cpu":
                ctx.meter.free(dev)

    measurements = sweep(ctx, devices, dtypes, sizes, measure, notes, sustain,
                         resolved(cfg.sustained_s, "sustained_s"))
    ctx.meter.set_tf32(False)
    return ProbeOutput(measurements, notes=notes,
                       params={"sizes": list(sizes), "dtypes": list(wanted)})


def sweep(ctx: ProbeContext, devices: list[str], dtypes: dict[str, list[str]],
          sizes: list[int], measure: Measure, notes: list[str],
          sustain: Sustain | None = None, sustain_s: float = 0.0) -> list[Measurement]:
    """Every size on the first device, then the best size per dtype on the others, then each
    dtype's best size sustained for `sustain_s` on the first, each item only when its
    estimated cost fits its share of the budget."""
    first, others = devices[0], devices[1:]
    sustaining = sustain if sustain_s > 0 else None
    total = (len(dtypes[first]) * (len(sizes) + (sustaining is not None))
             + sum(len(dtypes[d]) for d in others))
    done = 0
    out: list[Measurement] = []
    best: dict[str, tuple[int, float]] = {}  # dtype -> (n, seconds per call) on the first
    warmed: set[str] = set()

    def one(dev: str, dt: str, n: int, est_s: float | None) -> Measurement | None:
        nonlocal done
        ctx.progress(f"{dev} {dt} n={n}", done, total)
        items_left = total - done
        done += 1
        why = unmeasurable(dt, n)
        if why:
            notes.append(f"{dt} n={n} on {dev} skipped, because {why}")
            return None
        if est_s is not None and not budget_allows(ctx, est_s, items_left):
            notes.append(f"{dt} n={n} on {dev} skipped, because one call would take "
                         f"~{est_s:.2g} s, beyond its time budget")
            return None
        m = _stays_local(notes, f"{dt} n={n} on {dev} skipped",
                         lambda: measure(dev, dt, n, items_left, dev in warmed))
        if m is not None:
            warmed.add(dev)
        return m

    for dt in dtypes[first]:
        per_size: list[Measurement] = []
        last: tuple[int, float] | None = None  # (n, seconds per call) of the previous size
        for n in sizes:
            m = one(first, dt, n, last[1] * (n / last[0]) ** 3 if last else None)
            if m is not None:
                per_size.append(m)
                last = (n, 2 * n**3 / m.value)
        if per_size:
            top = max(per_size, key=lambda m: m.value)
            best[dt] = (top.key["size"], 2 * top.key["size"] ** 3 / top.value)
            out += per_size + [peak_of("peak_flops", {"device": first, "dtype": dt}, per_size,
                                       "size", "FLOP/s")]
    for dev in others:
        for dt in dtypes[dev]:
            if dt not in best:
                done += 1
                notes.append(f"{dt} on {dev} skipped, because {first} measured no {dt} size "
                             "to compare it at")
                continue
            n, est = best[dt]
            m = one(dev, dt, n, est)
            if m is not None:
                out += [m, peak_of("peak_flops", {"device": dev, "dtype": dt}, [m], "size",
                                   "FLOP/s")]
    # Last, so that the sweep's sizes get their shares of the budget first: without its
    # sustained run a dtype is still judged, by the median of its bursts (matmul_rates.py).
    for dt in dtypes[first]:
        if sustaining is None:
            break
        ctx.progress(f"{first} {dt} sustained", done, total)
        done += 1
        got = _sustain_one(ctx, sustaining, first, dt, best.get(dt), sustain_s, total - done,
                           notes)
        out += [got] if got is not None else []
    ctx.progress("done", total, total)
    return out


def _sustain_one(ctx: ProbeContext, sustain: Sustain, dev: str, dt: str,
                 best: tuple[int, float] | None, seconds: float, items_left: int,
                 notes: list[str]) -> Measurement | None:
    """The sustained run of one dtype's best size, where one was measured and its seconds fit
    the budget; a failure stays local, as a note."""
    if best is None:
        return None
    n, est = best
    share = ctx.budget.remaining() / max(1, items_left + 1)
    if seconds + est > 2 * share or seconds + est > ctx.budget.remaining():
        notes.append(f"{dt} n={n} on {dev} not sustained, because {seconds:g} s of it would "
                     "not fit its time budget: its figure is the bursts' median")
        return None
    return _stays_local(notes, f"{dt} n={n} on {dev} not sustained",
                        lambda: sustain(dev, dt, n, est))


def _stays_local(notes: list[str], what: str, call: Callable[[], Measurement]
                 ) -> Measurement | None:
    """call(), or None and the note "<what>, because …" where it fails: one dtype or size that
    fails stays local, and what was measured stays. ProbeSkipped (the whole probe) passes, and
    so do KeyboardInterrupt and the runner's signals, which are not Exceptions."""
    try:
        return call()
    except ProbeSkipped:
        raise
    except Exception as exc:
        notes.append(f"{what}, because "
                     + ("it does not fit in memory" if is_oom(exc) else failure(exc)))
        return None


def sustained(ctx: ProbeContext, timer: Timer, call: Callable[[], Any], dev: str, dt: str,
              n: int, est_call_s: float, seconds: float,
              context: dict[str, Any]) -> Measurement:
    """`call` back to back for `seconds`, in windows of about WINDOW_S closed by the timer's
    sync, one sample a window (with the SM clock around it where NVML reads it):
    sustained_flops, its median the sustained figure."""
    read = ctx.meter.sm_clock_reader(dev, ctx.gpu_uuid(dev))
    calls = max(1, round(WINDOW_S / max(est_call_s, 1e-9)))
    timer(call, 1)  # this size's first call since its own timing, off the clock
    per_call: list[float] = []
    clocks: list[float | None] = []
    start = ctx.clock()
    while len(per_call) < MIN_WINDOWS or ctx.clock() - start < seconds:
        before = read() if read else None
        per_call.append(timer(call, calls) / calls)
        after = read() if read else None
        clocks.append(None if before is None or after is None else (before + after) / 2)
        # the next window from this one's calls: an estimate from the sweep can be off
        calls = max(1, round(WINDOW_S / max(per_call[-1], 1e-9)))
    timed = Timed(per_call, calls, 1, "seconds", clocks if read is not None else None)
    return throughput("sustained_flops", {"device": dev, "dtype": dt, "size": n}, timed,
                      2.0 * n**3, "FLOP/s",
                      {**context, "seconds": round(ctx.clock() - start, 3),
                       "window_s": WINDOW_S})


def _operands(ctx: ProbeContext, dev: str, dt: str, n: int
              ) -> tuple[Callable[[], Any], dict[str, Any]]:
    """The timed call at size n in dtype dt on random operands, and what its context
    records."""
    dtype = TORCH_DTYPES[dt]
    gen = torch.Generator(device=dev).manual_seed(n)
    # Random operands: zeros would let hardware with zero-skipping or power gating cheat.
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    context: dict[str, Any] = {"tf32_enabled": ctx.meter.tf32()}
    if dev == "cpu":
        context["threads"] = torch.get_num_threads()
    else:
        context["gpu_name"] = ctx.meter.device_name(dev)
    if dt == "fp8":
        context.update(fp8_context())
        return fp8_mm(*fp8_operands(a, b), torch.ones((), device=dev, dtype=torch.float32)), \
            context
    c = torch.empty(n, n, device=dev, dtype=dtype)

    def call() -> Any:
        return torch.mm(a, b, out=c)

    return call, context


def _measure(ctx: ProbeContext, cfg: MatmulConfig, dev: str, dt: str, n: int,
             items_left: int, warm: bool = False) -> Measurement:
    call, context = _operands(ctx, dev, dt, n)
    timed = ctx.time_op(call, dev, items_left, resolved(cfg.min_sample_s, "min_sample_s"),
                        warm=warm)
    return throughput("flops", {"device": dev, "dtype": dt, "size": n}, timed, 2.0 * n**3,
                      "FLOP/s", context)
