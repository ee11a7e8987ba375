"""Pure functions over a RunResult: % of datasheet peak, per-GPU spread. No torch import."""

from __future__ import annotations

from typing import Any

from benchbench.peaks import gpu_peak, pcie_rate
from benchbench.results import Measurement, RunResult
from benchbench.stats import spread

# Within one node, GPUs of one model differ by a few percent; 5% or more deserves a look
# (cooling, power capping, a degraded link).
GPU_SPREAD_WARN = 0.05


def gpu_name(run: RunResult, device: str) -> str | None:
    """The model name of 'cuda:N' from the environment snapshot (NVML, else torch)."""
    if not device.startswith("cuda:"):
        return None
    idx = int(device.split(":")[1])
    for g in run.environment.get("gpus", []):
        if g.get("index") == idx:
            return g.get("name")
    return None


def reference(run: RunResult, probe: str, m: Measurement) -> tuple[float, str] | None:
    """(the datasheet or link rate this measurement should be held against, what it is)."""
    if probe == "matmul" and m.metric in ("flops", "peak_flops"):
        peak = gpu_peak(m.context.get("gpu_name") or gpu_name(run, m.key["device"]))
        flops = peak.flops(m.key["dtype"]) if peak else None
        return (flops, f"{peak.model} dense {m.key['dtype']}") if flops else None
    if probe == "memory_bandwidth" and m.key.get("memory", "host") != "host":
        peak = gpu_peak(m.context.get("gpu_name") or gpu_name(run, m.key["memory"]))
        return (peak.memory_bandwidth, f"{peak.model} memory") if peak else None
    if probe == "host_device_copy" and "pcie_gen_current" in m.context:
        gen, width = m.context.get("pcie_gen_current"), m.context.get("pcie_width_current")
        gmax, wmax = m.context.get("pcie_gen_max"), m.context.get("pcie_width_max")
        rate = pcie_rate(gen, width)
        what = f"PCIe Gen{gen} x{width}"
        if gmax and wmax and (gmax, wmax) != (gen, width):
            what += f" (link capable of Gen{gmax} x{wmax})"
        return (rate, what) if rate else None
    return None


def fraction_of_reference(run: RunResult, probe: str, m: Measurement) -> float | None:
    ref = reference(run, probe, m)
    return m.value / ref[0] if ref else None


def gpu_spread(run: RunResult, probe: str, metric: str, group: str) -> list[dict[str, Any]]:
    """Per `group` value (e.g. dtype), the slowest GPU and the relative spread across GPUs."""
    pr = run.probe(probe)
    if pr is None:
        return []
    by_group: dict[Any, list[Measurement]] = {}
    for m in pr.measurements:
        if m.metric == metric and str(m.key.get("device", "")).startswith("cuda"):
            by_group.setdefault(m.key.get(group), []).append(m)
    rows = []
    for g, ms in by_group.items():
        if len(ms) < 2:
            continue
        slowest = min(ms, key=lambda m: m.value)
        s = spread([m.value for m in ms])
        rows.append({group: g, "slowest_device": slowest.key["device"],
                     "slowest_value": slowest.value, "unit": slowest.unit, "spread": s,
                     "warn": s >= GPU_SPREAD_WARN})
    return rows
