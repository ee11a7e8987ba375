"""Probe `matmul`: the highest dense matrix-multiply throughput per dtype, on each GPU or the CPU.

For each device, dtype and size n it times `torch.mm(a, b, out=c)` on random n x n matrices
(2 n^3 FLOP per call) and reports the median FLOP/s with its samples; `peak_flops` is the best
size's median. fp32 means true fp32: TF32 is switched off for matmuls and for cuDNN, inside
this worker process only.
"""

from __future__ import annotations

from typing import Any

import torch

from benchbench.probe import ProbeContext, ProbeOutput, peak_of, throughput
from benchbench.probe_configs import MatmulConfig
from benchbench.workloads._devices import (
    apply_tf32,
    budget_allows,
    gpu_indices,
    is_oom,
    usable_on,
)

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
                "fp16": torch.float16}
CPU_DTYPES = ("fp32", "bf16")  # TF32 is a GPU tensor-core mode; fp16 GEMM on CPU is emulated


def _usable_dtypes(dev: str, wanted: tuple[str, ...], notes: list[str]) -> list[str]:
    return usable_on(dev, wanted, CPU_DTYPES, ("tf32", "bf16"),
                     "the CPU path measures fp32 and bf16", notes)


def run(ctx: ProbeContext, cfg: MatmulConfig) -> ProbeOutput:
    devices = [f"cuda:{i}" for i in gpu_indices(ctx, cfg.devices)] if ctx.device == "cuda" \
        else ["cpu"]
    notes: list[str] = []
    plan = [(dev, dt) for dev in devices for dt in _usable_dtypes(dev, cfg.dtypes, notes)]
    sizes = sorted(cfg.sizes)
    total = len(plan) * len(sizes)
    done = 0
    measurements = []
    for dev, dt in plan:
        apply_tf32(dt == "tf32")
        per_size = []
        last: tuple[int, float] | None = None  # (n, seconds per call) of the previous size
        for n in sizes:
            ctx.progress(f"{dev} {dt} n={n}", done, total)
            items_left = total - done
            done += 1
            if last and not budget_allows(ctx, last[1] * (n / last[0]) ** 3, items_left):
                notes.append(f"{dt} n={n} on {dev} skipped, because one call would take "
                             f"~{last[1] * (n / last[0]) ** 3:.2g} s, beyond its time budget")
                continue
            try:
                m = _measure(ctx, cfg, dev, dt, n, items_left)
            except RuntimeError as exc:
                if not is_oom(exc):
                    raise
                notes.append(f"{dt} n={n} on {dev} skipped, because it does not fit in memory")
                continue
            finally:
                if dev != "cpu":
                    torch.cuda.empty_cache()
            per_size.append(m)
            last = (n, 2 * n**3 / m.value)
        if per_size:
            measurements.extend(per_size)
            measurements.append(
                peak_of("peak_flops", {"device": dev, "dtype": dt}, per_size, "size", "FLOP/s"))
    apply_tf32(False)
    ctx.progress("done", total, total)
    return ProbeOutput(measurements, notes=notes,
                       params={"sizes": sizes, "dtypes": list(cfg.dtypes)})


def _measure(ctx: ProbeContext, cfg: MatmulConfig, dev: str, dt: str, n: int,
             items_left: int) -> Any:
    dtype = TORCH_DTYPES[dt]
    gen = torch.Generator(device=dev).manual_seed(n)
    # Random operands: zeros would let hardware with zero-skipping or power gating cheat.
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    c = torch.empty(n, n, device=dev, dtype=dtype)
    timed = ctx.time_op(lambda: torch.mm(a, b, out=c), dev, items_left, cfg.min_sample_s)
    context: dict[str, Any] = {"tf32_enabled": torch.backends.cuda.matmul.allow_tf32}
    if dev == "cpu":
        context["threads"] = torch.get_num_threads()
    else:
        context["gpu_name"] = torch.cuda.get_device_name(dev)
    return throughput("flops", {"device": dev, "dtype": dt, "size": n}, timed, 2.0 * n**3,
                      "FLOP/s", context)
