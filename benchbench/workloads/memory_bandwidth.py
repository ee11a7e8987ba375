"""Probe `memory_bandwidth`: copy bandwidth of each GPU's memory and of host memory.

It times `dst.copy_(src)` on buffers at least 4x the last-level cache (L2 on a GPU), filled
with random bytes and pre-touched, and counts bytes read plus bytes written (2 x size), the
STREAM "copy" convention. Host memory is always measured: preprocessing and the page cache live
there, and DDR4 against DDR5 shows up here.
"""

from __future__ import annotations

from typing import Any

import torch

from benchbench.probe import ProbeContext, ProbeOutput, throughput
from benchbench.probe_configs import MemoryBandwidthConfig
from benchbench.workloads._devices import gpu_indices, is_oom, random_bytes

GiB = 1024**3
MiB = 1024**2
# When the cache size is unknown, assume a large one rather than risk measuring a cache.
_FALLBACK_LLC = 256 * MiB
_FALLBACK_L2 = 128 * MiB


def _copy_bandwidth(ctx: ProbeContext, cfg: MemoryBandwidthConfig, device: str, size: int,
                    items_left: int, context: dict[str, Any]) -> Any:
    src = random_bytes(size, device)
    dst = torch.empty_like(src)
    dst.fill_(1)  # pre-touch: page faults and first-touch zeroing must not be timed
    timed = ctx.time_op(lambda: dst.copy_(src), device, items_left, cfg.min_sample_s)
    memory = "host" if device == "cpu" else device
    return throughput("copy_bandwidth", {"memory": memory, "size_bytes": size}, timed,
                      2.0 * size, "B/s", context)


def _round_mib(n: float) -> int:
    return int(-(-n // MiB) * MiB)


def run(ctx: ProbeContext, cfg: MemoryBandwidthConfig) -> ProbeOutput:
    gpus = gpu_indices(ctx, cfg.devices) if ctx.device == "cuda" else []
    llc = ctx.facts.get("host_llc_bytes") or _FALLBACK_LLC
    host_size = cfg.host_size_bytes or _round_mib(max(4 * llc, (256 * MiB if ctx.quick
                                                                else GiB)))
    notes: list[str] = []
    if host_size < 4 * llc:
        notes.append(f"host buffer {host_size} B is under 4x the {llc} B last-level cache, "
                     "so the figure may include cache bandwidth")
    measurements = []
    total = len(gpus) + 1
    gpu_sizes: dict[str, int] = {}
    for done, idx in enumerate(gpus):
        dev = f"cuda:{idx}"
        l2 = ctx.facts["gpus"][idx].get("l2_cache_bytes") or _FALLBACK_L2
        size = cfg.gpu_size_bytes or _round_mib(max(4 * l2, 512 * MiB if ctx.quick else 2 * GiB))
        gpu_sizes[dev] = size
        ctx.progress(f"{dev} copy {size // MiB} MiB", done, total)
        try:
            measurements.append(_copy_bandwidth(
                ctx, cfg, dev, size, total - done,
                {"resource": "gpu_memory", "l2_cache_bytes": l2,
                 "gpu_name": torch.cuda.get_device_name(dev)}))
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"{dev} skipped, because two {size} B buffers do not fit in its memory")
        finally:
            torch.cuda.empty_cache()
    ctx.progress(f"host copy {host_size // MiB} MiB", len(gpus), total)
    measurements.append(_copy_bandwidth(
        ctx, cfg, "cpu", host_size, 1,
        {"resource": "host_memory", "llc_bytes": llc, "threads": torch.get_num_threads()}))
    ctx.progress("done", total, total)
    return ProbeOutput(measurements, notes=notes,
                       params={"host_size_bytes": host_size,
                               "gpu_size_bytes": max(gpu_sizes.values(), default=None)})
