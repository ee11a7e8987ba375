"""Probe `host_device_copy`: host<->device bandwidth over PCIe, pinned and pageable, per GPU.

For each GPU, direction (h2d, d2h), host memory kind and size, it times one copy with CUDA
events and reports B/s. It reads the PCIe generation and width from NVML while a burst of
copies is in flight, because the link trains down at idle. With several GPUs it also copies to
all of them at once: GPUs behind one PCIe switch or root port share its bandwidth.
"""

from __future__ import annotations

from typing import Any

import torch

from benchbench.environment import pcie_link
from benchbench.probe import ProbeContext, ProbeOutput, peak_of, throughput
from benchbench.probe_configs import HostDeviceCopyConfig
from benchbench.timing import synchronized_wall_timer
from benchbench.workloads._devices import gpu_indices, is_oom, random_bytes


def _buffers(size: int, dev: str, memory: str) -> tuple[torch.Tensor, torch.Tensor]:
    host = random_bytes(size, "cpu")
    if memory == "pinned":
        host = host.pin_memory()
    device_buf = torch.empty(size, dtype=torch.uint8, device=dev)
    device_buf.fill_(1)  # pre-touch
    return host, device_buf


def _copy_fn(direction: str, host: torch.Tensor, device_buf: torch.Tensor) -> Any:
    # non_blocking only has an effect on pinned memory; pageable copies stage through a
    # driver buffer synchronously, which is exactly the cost users pay for pageable memory.
    if direction == "h2d":
        return lambda: device_buf.copy_(host, non_blocking=True)
    return lambda: host.copy_(device_buf, non_blocking=True)


def _link_under_load(dev: str, size: int) -> dict[str, Any]:
    """PCIe link state read from NVML while pinned copies keep the link busy."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except Exception as exc:
        return {"pcie_link_reason": f"NVML unavailable: {exc}"}
    try:
        uuid = str(torch.cuda.get_device_properties(dev).uuid)
        h = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        host, device_buf = _buffers(size, dev, "pinned")
        for _ in range(8):
            device_buf.copy_(host, non_blocking=True)
        link = pcie_link(nvml, h)  # read while the copies are in flight
        torch.cuda.synchronize(dev)
        return link
    except Exception as exc:
        return {"pcie_link_reason": f"could not read the PCIe link: {exc}"}
    finally:
        nvml.nvmlShutdown()


def run(ctx: ProbeContext, cfg: HostDeviceCopyConfig) -> ProbeOutput:
    gpus = gpu_indices(ctx, cfg.devices)
    sizes = sorted(cfg.sizes)
    notes: list[str] = []
    plan = [(f"cuda:{i}", d, m) for i in gpus for m in cfg.memories for d in cfg.directions]
    concurrent = cfg.concurrent and len(gpus) > 1
    total = len(plan) * len(sizes) + (len(cfg.directions) if concurrent else 0)
    done = 0
    links = {f"cuda:{i}": _link_under_load(f"cuda:{i}", max(sizes)) for i in gpus}
    measurements = []
    for dev, direction, memory in plan:
        per_size = []
        for size in sizes:
            ctx.progress(f"{dev} {direction} {memory} {size >> 20} MiB", done, total)
            done += 1
            try:
                host, device_buf = _buffers(size, dev, memory)
                timed = ctx.time_op(_copy_fn(direction, host, device_buf), dev, total - done + 1,
                                    cfg.min_sample_s)
            except RuntimeError as exc:
                if not is_oom(exc):
                    raise
                notes.append(f"{direction} {memory} {size} B on {dev} skipped, because the "
                             "buffers do not fit in memory")
                continue
            finally:
                torch.cuda.empty_cache()
            key = {"device": dev, "direction": direction, "memory": memory, "size_bytes": size}
            per_size.append(throughput("copy_bandwidth", key, timed, float(size), "B/s",
                                       {**links[dev], "gpu_name": torch.cuda.get_device_name(dev)}))
        if per_size:
            measurements.extend(per_size)
            peak = peak_of("peak_bandwidth", {"device": dev, "direction": direction,
                                              "memory": memory}, per_size, "size_bytes", "B/s")
            peak.context.update(links[dev])
            measurements.append(peak)
    if concurrent:
        measurements.extend(_all_at_once(ctx, cfg, gpus, max(sizes), done, total))
    ctx.progress("done", total, total)
    return ProbeOutput(measurements, notes=notes, params={"sizes": sizes})


def _all_at_once(ctx: ProbeContext, cfg: HostDeviceCopyConfig, gpus: list[int], size: int,
                 done: int, total: int) -> list[Any]:
    devs = [f"cuda:{i}" for i in gpus]
    out = []
    for direction in cfg.directions:
        ctx.progress(f"all {len(devs)} GPUs {direction} pinned", done, total)
        done += 1
        pairs = [_buffers(size, d, "pinned") for d in devs]
        fns = [_copy_fn(direction, h, g) for h, g in pairs]
        timed = ctx.time_op(lambda fns=fns: [f() for f in fns], "cuda", total - done + 1,
                            cfg.min_sample_s, timer=synchronized_wall_timer(devs))
        key = {"devices": ",".join(devs), "direction": direction, "memory": "pinned",
               "size_bytes": size}
        out.append(throughput("aggregate_bandwidth", key, timed, float(size * len(devs)), "B/s",
                              {"gpus": len(devs)}))
        del pairs, fns
        torch.cuda.empty_cache()
    return out
