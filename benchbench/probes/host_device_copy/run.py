"""Probe `host_device_copy`: host<->device bandwidth over PCIe, pinned and pageable, per GPU.

The first GPU sweeps every direction (h2d, d2h), host memory kind and size; the other GPUs copy
only the largest size from pinned memory, each direction (the figure the verdict uses, and the
one that shows a degraded link); with several GPUs it also copies to all of them at once (GPUs
behind one PCIe switch or root port share its bandwidth). Each copy is timed with CUDA events
and reported in B/s. The buffers are made once per GPU, at the largest size, and smaller copies
use their first bytes. Every item is started only when its estimated cost fits its share of
the budget. The PCIe generation and width are read from NVML during a burst of copies, the
highest of several readings, because an idle link trains down and takes a moment to come up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchbench.core.results import Measurement
from benchbench.machine.nvml import pcie_link
from benchbench.probes._devices import (
    budget_allows,
    device_uuid,
    gpu_indices,
    is_oom,
    random_bytes,
)
from benchbench.probes.api import ProbeContext, ProbeOutput, peak_of, resolved, throughput
from benchbench.probes.host_device_copy.config import HostDeviceCopyConfig
from benchbench.probes.meter import Meter, synchronized_wall_timer

# Link readings taken while a burst of copies is in flight, LINK_POLL_S apart.
LINK_READINGS = 8
LINK_POLL_S = 0.02


@dataclass(frozen=True)
class Item:
    """One copy to time: to or from one GPU (device "all": every GPU at once)."""

    device: str
    direction: str  # "h2d" or "d2h"
    memory: str  # "pinned" or "pageable"
    size: int
    gpus: int = 1  # how many GPUs it copies to at once


def plan(gpus: list[int], cfg: HostDeviceCopyConfig) -> list[Item]:
    """The first GPU's full sweep, the largest pinned copy on each other GPU, then all at
    once."""
    sizes = sorted(resolved(cfg.sizes, "sizes"))
    first = f"cuda:{gpus[0]}"
    items = [Item(first, d, m, s) for m in cfg.memories for d in cfg.directions for s in sizes]
    top = sizes[-1]
    for i in gpus[1:]:
        items += [Item(f"cuda:{i}", d, "pinned", top) for d in cfg.directions]
    if cfg.concurrent and len(gpus) > 1:
        items += [Item("all", d, "pinned", top, len(gpus)) for d in cfg.directions]
    return items


# measure(item, items_left, warm) -> its copy_bandwidth (or aggregate_bandwidth) measurement;
# `warm` when the device already copied at its clocks in this sweep
Measure = Callable[[Item, int, bool], Measurement]


def sweep(ctx: ProbeContext, items: list[Item], measure: Measure, notes: list[str]
          ) -> list[Measurement]:
    """Each item in turn, gated on the budget: its cost is estimated from the last rate
    measured for that memory kind (pageable copies are slower than pinned ones)."""
    rates: dict[str, float] = {}
    out: list[Measurement] = []
    warmed: set[str] = set()
    for done, item in enumerate(items):
        ctx.progress(f"{item.device} {item.direction} {item.memory} {item.size >> 20} MiB",
                     done, len(items))
        # All at once may share one link: priced as if one GPU's rate carried every copy.
        rate = rates.get(item.memory)
        if rate and not budget_allows(ctx, item.size * item.gpus / rate, len(items) - done):
            notes.append(f"{item.direction} {item.memory} {item.size >> 20} MiB on "
                         f"{item.device} skipped, because the time budget ran short")
            continue
        try:
            m = measure(item, len(items) - done, item.device in warmed)
            warmed.add(item.device)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"{item.direction} {item.memory} {item.size} B on {item.device} "
                         "skipped, because the buffers do not fit in memory")
            continue
        if item.device != "all":
            rates[item.memory] = m.value
        out.append(m)
    ctx.progress("done", len(items), len(items))
    return out


def with_peaks(measured: list[Measurement], links: dict[str, dict[str, Any]]
               ) -> list[Measurement]:
    """The measurements, each per-device series followed by its peak over sizes."""
    out: list[Measurement] = []
    series: dict[tuple[str, str, str], list[Measurement]] = {}
    for m in measured:
        if m.metric == "copy_bandwidth":
            series.setdefault((m.key["device"], m.key["direction"], m.key["memory"]),
                              []).append(m)
    for (dev, direction, memory), per_size in series.items():
        out += per_size
        peak = peak_of("peak_bandwidth", {"device": dev, "direction": direction,
                                          "memory": memory}, per_size, "size_bytes", "B/s")
        peak.context.update(links.get(dev, {}))
        out.append(peak)
    return out + [m for m in measured if m.metric != "copy_bandwidth"]


class _Buffers:
    """One GPU's copy buffers at the largest size: made once, random, pre-touched."""

    def __init__(self, dev: str, size: int) -> None:
        self.dev, self.size = dev, size
        self._host: dict[str, torch.Tensor] = {}
        self.device = torch.empty(size, dtype=torch.uint8, device=dev)
        self.device.fill_(1)  # pre-touch

    def host(self, memory: str) -> torch.Tensor:
        if memory not in self._host:
            self._host[memory] = random_bytes(self.size, "cpu", pin=memory == "pinned")
        return self._host[memory]

    def copy_fn(self, direction: str, memory: str, size: int) -> Callable[[], Any]:
        # non_blocking only has an effect on pinned memory; pageable copies stage through a
        # driver buffer synchronously, which is exactly the cost users pay for pageable memory.
        host, dev = self.host(memory)[:size], self.device[:size]
        if direction == "h2d":
            return lambda: dev.copy_(host, non_blocking=True)
        return lambda: host.copy_(dev, non_blocking=True)

    def drop_pageable(self) -> None:
        self._host.pop("pageable", None)


def max_link(read: Callable[[], dict[str, Any]], busy: Callable[[], bool],
             readings: int = LINK_READINGS, pause: Callable[[], None] | None = None
             ) -> dict[str, Any]:
    """The highest PCIe generation and width of several readings taken while `busy()` holds
    (at least one). A link trains up from its idle state within milliseconds of the first
    transfer, so a single reading at the start of a burst can show Gen1."""
    pause = pause or (lambda: time.sleep(LINK_POLL_S))
    best: dict[str, Any] = {}
    taken = 0
    while taken < max(1, readings) and (taken == 0 or busy()):
        for k, v in read().items():
            if k.endswith("_current") and v is not None:
                best[k] = max(best.get(k) or 0, v)
            else:
                best.setdefault(k, v)
        taken += 1
        pause()
    best["pcie_link_readings"] = taken
    return best


def _link_under_load(dev: str, bufs: _Buffers, meter: Meter) -> dict[str, Any]:
    """PCIe link state read from NVML while pinned copies keep the link busy."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except Exception as exc:
        return {"pcie_link_reason": f"NVML unavailable: {exc}"}
    try:
        h = nvml.nvmlDeviceGetHandleByUUID(device_uuid(dev))
        copy = bufs.copy_fn("h2d", "pinned", bufs.size)
        for _ in range(16):  # 16 of the largest copies: about 0.3 s at Gen5 x16
            copy()
        done = meter.event(dev)
        link = max_link(lambda: pcie_link(nvml, h), lambda: not done.query())
        meter.sync(dev)
        return link
    except Exception as exc:
        return {"pcie_link_reason": f"could not read the PCIe link: {exc}"}
    finally:
        nvml.nvmlShutdown()


def run(ctx: ProbeContext, cfg: HostDeviceCopyConfig) -> ProbeOutput:
    gpus = gpu_indices(ctx, cfg.devices)
    sizes = resolved(cfg.sizes, "sizes")
    min_sample_s = resolved(cfg.min_sample_s, "min_sample_s")
    notes: list[str] = []
    top = max(sizes)
    buffers: dict[str, _Buffers] = {}
    links: dict[str, dict[str, Any]] = {}

    def bufs(dev: str) -> _Buffers:
        if dev not in buffers:
            for other in buffers.values():  # pageable copies are done once the next GPU starts
                other.drop_pageable()
            buffers[dev] = _Buffers(dev, top)
            links[dev] = _link_under_load(dev, buffers[dev], ctx.meter)
        return buffers[dev]

    def measure(item: Item, items_left: int, warm: bool) -> Measurement:
        if item.device == "all":
            devs = [f"cuda:{i}" for i in gpus]
            fns = [bufs(d).copy_fn(item.direction, "pinned", item.size) for d in devs]
            timed = ctx.time_op(lambda: [f() for f in fns], "cuda", items_left,
                                min_sample_s, timer=synchronized_wall_timer(devs, ctx.meter),
                                warm=warm)
            key = {"devices": ",".join(devs), "direction": item.direction, "memory": "pinned",
                   "size_bytes": item.size}
            return throughput("aggregate_bandwidth", key, timed, float(item.size * len(devs)),
                              "B/s", {"gpus": len(devs)})
        fn = bufs(item.device).copy_fn(item.direction, item.memory, item.size)
        timed = ctx.time_op(fn, item.device, items_left, min_sample_s, warm=warm)
        key = {"device": item.device, "direction": item.direction, "memory": item.memory,
               "size_bytes": item.size}
        return throughput("copy_bandwidth", key, timed, float(item.size), "B/s",
                          {**links[item.device],
                           "gpu_name": ctx.meter.device_name(item.device)})

    try:
        measured = sweep(ctx, plan(gpus, cfg), measure, notes)
    finally:
        buffers.clear()
        ctx.meter.free("cuda")
    if len(gpus) > 1:
        notes.append(f"the other GPUs copied {top >> 20} MiB from pinned memory only: the "
                     f"size sweep and pageable memory ran on cuda:{gpus[0]}")
    return ProbeOutput(with_peaks(measured, links), notes=notes,
                       params={"sizes": sorted(sizes)})
