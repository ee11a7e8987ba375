"""Probe `memory_bandwidth`: copy bandwidth of each GPU's memory and of host memory.

It times `dst.copy_(src)` on buffers at least 4x the last-level cache (L2 on a GPU), filled
with random bytes and pre-touched, and counts bytes read plus bytes written (2 x size), the
STREAM "copy" convention. Host memory is always measured: preprocessing and the page cache live
there, and DDR4 against DDR5 shows up here. Each GPU is started only when its estimated cost
fits its share of the budget; the host is always measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchbench.core.results import Measurement
from benchbench.probes._devices import budget_allows, gpu_indices, is_oom, random_bytes
from benchbench.probes.api import ProbeContext, ProbeOutput, resolved, throughput
from benchbench.probes.memory_bandwidth.config import MemoryBandwidthConfig, gpu_cache, host_cache

GiB = 1024**3
MiB = 1024**2
@dataclass(frozen=True)
class Item:
    device: str  # "cpu" (host memory) or "cuda:N"
    size: int  # bytes per buffer
    cache: int  # bytes of the last-level cache the buffer must dwarf


def plan(ctx: ProbeContext, cfg: MemoryBandwidthConfig) -> tuple[list[Item], list[str]]:
    """Every GPU, then the host, at the config's sizes (each ≥ 4x its cache unless the user
    chose smaller). (items, notes)."""
    gpus = gpu_indices(ctx, cfg.devices) if ctx.device == "cuda" else []
    # A config resolved for the CPU has no GPU size: resolved() says so, never a 0-byte plan.
    items = [Item(f"cuda:{i}", resolved(cfg.gpu_size_bytes, "gpu_size_bytes"),
                  gpu_cache(ctx.facts, i)) for i in gpus]
    items.append(Item("cpu", resolved(cfg.host_size_bytes, "host_size_bytes"),
                      host_cache(ctx.facts)))
    notes = [f"{'host' if i.device == 'cpu' else i.device} buffer {i.size} B is under 4x its "
             f"{i.cache} B cache, so the figure may include cache bandwidth"
             for i in items if i.size < 4 * i.cache]
    return items, notes


# measure(item, items_left) -> its copy_bandwidth measurement
Measure = Callable[[Item, int], Measurement]


def sweep(ctx: ProbeContext, items: list[Item], measure: Measure, notes: list[str]
          ) -> list[Measurement]:
    out: list[Measurement] = []
    rate: float | None = None  # the last GPU's: the next one is priced by it
    for done, item in enumerate(items):
        ctx.progress(f"{'host' if item.device == 'cpu' else item.device} copy "
                     f"{item.size // MiB} MiB", done, len(items))
        left = len(items) - done
        if item.device != "cpu" and rate and not budget_allows(ctx, 2 * item.size / rate, left):
            notes.append(f"{item.device} skipped, because the time budget ran short")
            continue
        try:
            m = measure(item, left)
        except RuntimeError as exc:
            if not is_oom(exc) or item.device == "cpu":
                raise
            notes.append(f"{item.device} skipped, because two {item.size} B buffers do not fit "
                         "in its memory")
            continue
        if item.device != "cpu":
            rate = m.value
        out.append(m)
    ctx.progress("done", len(items), len(items))
    return out


def run(ctx: ProbeContext, cfg: MemoryBandwidthConfig) -> ProbeOutput:
    items, notes = plan(ctx, cfg)

    def measure(item: Item, items_left: int) -> Measurement:
        try:
            return _copy_bandwidth(ctx, cfg, item, items_left)
        finally:
            if item.device != "cpu":
                ctx.meter.free(item.device)

    measurements = sweep(ctx, items, measure, notes)
    gpu_sizes = [i.size for i in items if i.device != "cpu"]
    return ProbeOutput(measurements, notes=notes,
                       params={"host_size_bytes": items[-1].size,
                               "gpu_size_bytes": max(gpu_sizes, default=None)})


def _copy_bandwidth(ctx: ProbeContext, cfg: MemoryBandwidthConfig, item: Item,
                    items_left: int) -> Measurement:
    src = random_bytes(item.size, item.device)
    dst = torch.empty_like(src)
    dst.fill_(1)  # pre-touch: page faults and first-touch zeroing must not be timed
    timed = ctx.time_op(lambda: dst.copy_(src), item.device, items_left,
                        resolved(cfg.min_sample_s, "min_sample_s"))
    host = item.device == "cpu"
    context: dict[str, Any] = (
        {"resource": "host_memory", "llc_bytes": item.cache, "threads": torch.get_num_threads()}
        if host else {"resource": "gpu_memory", "l2_cache_bytes": item.cache,
                      "gpu_name": ctx.meter.device_name(item.device)})
    return throughput("copy_bandwidth", {"memory": "host" if host else item.device,
                                         "size_bytes": item.size}, timed, 2.0 * item.size,
                      "B/s", context)
