"""The device layer's stateless half, shared by every probe and workload: which GPUs exist and
which to use, selecting one, OOM detection, a failure's reason, budget checks, random buffers,
the NCCL version. The stateful half (initialisation, syncs, timers, the TF32 and cuDNN modes,
the allocator's cache and its statistics) is probes/meter.py, whose Meter the simulator
replaces. Only these two modules touch torch.cuda and torch.backends
(tests/invariants/test_device_layer.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from benchbench.probes._config import capability as facts_capability
from benchbench.probes.api import ProbeContext, ProbeSkipped


def gpu_indices(ctx: ProbeContext, requested: tuple[int, ...] | None) -> list[int]:
    """The GPU indices a probe should measure: the requested ones, or every visible GPU."""
    count = int(ctx.facts.get("cuda_device_count", 0))
    if count == 0:
        raise ProbeSkipped("no CUDA GPU is visible to torch")
    if requested is None:
        return list(range(count))
    missing = [i for i in requested if not 0 <= i < count]
    if missing:
        raise ValueError(f"devices {missing} do not exist; this machine has GPUs 0..{count - 1}")
    return list(requested)


# How allocation failures read when they do not come as torch.cuda.OutOfMemoryError: the
# caching allocator ("CUDA out of memory"), the CPU allocator ("DefaultCPUAllocator: can't
# allocate memory"), and cuBLAS and cuDNN failing to get their workspace, which torch raises as
# a plain RuntimeError ("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)",
# "cuDNN error: CUDNN_STATUS_ALLOC_FAILED"; cuDNN 9 adds "CUDNN_STATUS_ALLOC_FAILED_DEVICE").
_OOM_TEXT = ("out of memory", "can't allocate memory", "cublas_status_alloc_failed",
             "cudnn_status_alloc_failed")


def is_oom(exc: BaseException) -> bool:
    """True for a CUDA or host allocation failure (torch raises several kinds)."""
    import torch

    oom_type = getattr(torch.cuda, "OutOfMemoryError", ())
    text = str(exc).lower()
    return isinstance(exc, oom_type) or any(t in text for t in _OOM_TEXT)


def failure(exc: BaseException) -> str:
    """An exception as a skipped row's reason: its type and the first line of its message (a
    precision, dtype or size that raises is skipped; what was measured before it stays)."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def budget_allows(ctx: ProbeContext, est_call_s: float, items_left: int) -> bool:
    """Whether a measurement whose single call takes est_call_s fits its share of the budget.

    It needs about min_repeats timed calls plus calibration and warm-up (two more, and at
    least the warm-up's seconds); a 2x slack keeps estimates from dropping sizes that would just
    fit, but never past what is left of the whole budget.
    """
    remaining = ctx.budget.remaining()
    need = est_call_s * (ctx.policy.min_repeats + 2)
    share = remaining / max(1, items_left)
    return need <= 2 * share and need + ctx.policy.warmup_s <= remaining


_BLOCK = 16 * 1024**2


def random_bytes(size: int, device: str, pin: bool = False) -> Any:
    """A uint8 buffer of random bytes, every page touched; in pinned host memory with `pin`.

    A 16 MiB random block is tiled over the buffer: random data (never zeros, which some
    hardware compresses or skips) without spending a minute in the RNG for gigabytes. A pinned
    buffer is allocated pinned, not copied into pinned memory: no second copy of it exists.
    """
    import torch

    gen = torch.Generator(device=device).manual_seed(size)
    block = torch.randint(0, 256, (min(size, _BLOCK),), dtype=torch.uint8, device=device,
                          generator=gen)
    buf = torch.empty(size, dtype=torch.uint8, device=device, pin_memory=pin)
    whole = size // block.numel() * block.numel()
    buf[:whole].view(-1, block.numel()).copy_(block.expand(whole // block.numel(), -1))
    buf[whole:] = block[: size - whole]
    return buf


def capability(facts: dict[str, Any], dev: str) -> tuple[int, int]:
    """The compute capability of 'cuda:N' from the device facts torch gathered (so that the
    simulator can plan for a GPU it does not have); torch itself when the facts lack it."""
    known = facts_capability(facts, int(dev.split(":")[1]) if ":" in dev else 0)
    if known is not None:
        return known
    import torch

    return torch.cuda.get_device_capability(dev)


# fp8 tensor cores arrive with Ada (8.9) and Hopper (9.0).
FP8_CAPABILITY = (8, 9)


def fp8_unavailable(dev: str, facts: dict[str, Any]) -> str | None:
    """Why `dev` has no fp8 tensor cores for torch to use, or None when it has."""
    if not dev.startswith("cuda"):
        return ("fp8 needs the tensor cores of a GPU of compute capability 8.9 or later (Ada, "
                "Hopper)")
    major, minor = capability(facts, dev)
    if (major, minor) < FP8_CAPABILITY:
        return (f"compute capability {major}.{minor} has no fp8 tensor cores (8.9 and later: "
                "Ada, Hopper)")
    import torch

    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no float8_e4m3fn scaled matmul"
    return None


def usable_on(dev: str, wanted: tuple[str, ...], cpu_allowed: tuple[str, ...],
              ampere_only: tuple[str, ...], cpu_reason: str, notes: list[str],
              facts: dict[str, Any] | None = None,
              fp8_why: Callable[[str, dict[str, Any]], str | None] = fp8_unavailable
              ) -> list[str]:
    """The modes in `wanted` that `dev` can run; each one it cannot gets a note.

    fp8 goes first, by `fp8_why` (why `dev` cannot run it, or None): fp8 tensor cores by
    default; training also needs torchao. TF32 and bf16 tensor cores arrive with Ampere
    (compute capability 8.0). Judge by the hardware: torch.cuda.is_bf16_supported() says True
    on V100/T4 through emulation, which would be measured as if it were the real thing.
    """
    why = fp8_why(dev, facts or {}) if "fp8" in wanted else None
    if why:
        notes.append(f"fp8 on {dev} skipped, because {why}")
        wanted = tuple(m for m in wanted if m != "fp8")
    if dev == "cpu":
        notes += [f"{m} on cpu skipped, because {cpu_reason}" for m in wanted
                  if m not in cpu_allowed]
        return [m for m in wanted if m in cpu_allowed]
    major, minor = capability(facts or {}, dev)
    if major >= 8:
        return list(wanted)
    notes += [f"{m} on {dev} skipped, because compute capability {major}.{minor} has no "
              "TF32/bf16 tensor cores" for m in wanted if m in ampere_only]
    return [m for m in wanted if m not in ampere_only]


def cuda_available() -> bool:
    """Whether torch sees a usable CUDA GPU (without initialising CUDA)."""
    import torch

    return bool(torch.cuda.is_available())


def device_count() -> int:
    import torch

    return int(torch.cuda.device_count())


def select_device(index: int) -> str:
    """Make GPU `index` this process's current device (a rank's own GPU); returns 'cuda:N'."""
    import torch

    torch.cuda.set_device(index)
    return f"cuda:{index}"


def device_uuid(dev: str) -> str:
    """The GPU's UUID as NVML spells it ('GPU-…'), to find its NVML handle."""
    import torch

    uuid = str(torch.cuda.get_device_properties(dev).uuid)
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


def nccl_version() -> str:
    import torch

    v = torch.cuda.nccl.version()  # a tuple in torch 2.x, an int in older releases
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def single_threaded() -> bool:
    """Whether this process runs one thread only: a fork then copies no lock that another
    thread (OpenMP's, DALI's) might hold."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def process_context(fallback: Any = None) -> Any:
    """How to start helper processes (ranks, loader workers) from a probe's worker: fork when
    that is safe (one thread, no CUDA context), so that they start in milliseconds with torch
    already imported; else `fallback` (a multiprocessing context), by default spawn, which
    pays a fresh interpreter and torch import (a few seconds on a small machine)."""
    import multiprocessing

    import torch

    if single_threaded() and not torch.cuda.is_initialized():
        return multiprocessing.get_context("fork")
    return fallback or multiprocessing.get_context("spawn")
