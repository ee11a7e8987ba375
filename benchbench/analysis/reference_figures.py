"""A run's headline figures, each with the conditions it was measured under: ResNet50 per
precision, GPT MFU, matmul per dtype (its sustained figure, matmul_rates.py), GPU memory copy,
pinned host copies and all-reduce busbw. What reference_check.py holds against the published
references. Pure functions over a RunResult.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from benchbench.analysis import clocks, derive, matmul_rates
from benchbench.core.gpus import run_gpus
from benchbench.core.results import Measurement, RunResult

# memory_bandwidth counts bytes read plus bytes written, 2 x size per copy (its docstring);
# host_device_copy copies with tensor.copy_, which a copy engine carries.
MEMORY_COUNTING = "read+write"
HOST_COPY_METHOD = "copy engine"
MATMUL_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8")


@dataclass(frozen=True)
class Figure:
    """One headline measurement of the run, with the conditions it was measured under."""

    name: str  # "ResNet50 amp_bf16", the same on every run (compare's row)
    metric: str  # the reference table's metric
    precision: str | None
    value: float
    unit: str
    device: str  # "cuda:0", "cpu"; the slowest GPU of several
    gpu: str | None  # the GPU's name as NVML or torch reported it; None on a CPU
    conditions: dict[str, Any]
    of_gpus: int = 1  # the GPUs this figure is the slowest of
    # the SM clock its samples ran at, where they carry it (analysis/clocks.py): a figure
    # under its reference at a clock held under its maximum says which is short
    clock: clocks.AtClock | None = None
    # how the value was timed where that decides what it can be held against: a matmul's
    # "sustained 1.0 s at n=8192 …; burst peak …" (matmul_rates.py)
    basis: str | None = None


def _ok(run: RunResult, probe: str) -> list[Measurement]:
    pr = run.probe(probe)
    return pr.measurements if pr is not None and pr.status == "ok" else []


def _gpu(run: RunResult, device: str, m: Measurement | None = None) -> str | None:
    if not device.startswith("cuda"):
        return None
    return (m.context.get("gpu_name") if m else None) or derive.gpu_name(run, device) or device


def _training(run: RunResult) -> list[Figure]:
    out = []
    for m in _ok(run, "resnet50"):
        if m.metric == "throughput":
            dev, prec = str(m.key.get("device")), m.key.get("precision")
            out.append(Figure(f"ResNet50 {prec}", "resnet50_throughput", prec, m.value, m.unit,
                              dev, _gpu(run, dev, m),
                              {"precision": prec, "image_size": m.key.get("image_size"),
                               "batch": m.context.get("batch", m.key.get("batch_size")),
                               "gpus": 1}))
    measured = {str(m.key): m for m in _ok(run, "transformer") if m.metric == "throughput"}
    for u in derive.transformer_utilisation(run):
        t = measured.get(str(u["key"]))
        if u["mfu"] is None or t is None:
            continue
        dev, prec = str(t.key.get("device")), t.key.get("precision")
        out.append(Figure(f"GPT MFU {prec} ({t.key.get('preset')})", "gpt_mfu", prec,
                          u["mfu"], "ratio", dev, _gpu(run, dev, t),
                          {"precision": prec, "batch": t.context.get("batch"), "gpus": 1}))
    return out


def _devices(run: RunResult) -> list[Figure]:
    out = []
    for m in _ok(run, "matmul"):
        dt, dev = m.key.get("dtype"), str(m.key.get("device"))
        got = matmul_rates.rate(run, dev, str(dt)) if m.metric == "peak_flops" else None
        if dt in MATMUL_DTYPES and got is not None:
            out.append(Figure(f"matmul {dt}", "matmul_flops", dt, got.value, m.unit, dev,
                              _gpu(run, dev), {"gpus": 1},
                              clock=clocks.at_clock(run, got.measurement),
                              basis=matmul_rates.basis(got)))
    for m in _ok(run, "memory_bandwidth"):
        dev = str(m.key.get("memory", "host"))
        if m.metric == "copy_bandwidth" and dev != "host":
            out.append(Figure("GPU memory copy", "memory_copy_bandwidth", None, m.value, m.unit,
                              dev, _gpu(run, dev, m),
                              {"gpus": 1, "counting": MEMORY_COUNTING}))
    for m in _ok(run, "host_device_copy"):
        dev, way = str(m.key.get("device")), m.key.get("direction")
        if m.metric == "peak_bandwidth" and m.key.get("memory") == "pinned" \
                and way in ("h2d", "d2h"):
            out.append(Figure(f"pinned {way} copy", f"{way}_bandwidth", None, m.value, m.unit,
                              dev, _gpu(run, dev, m),
                              {"gpus": 1, "copy_method": HOST_COPY_METHOD}))
    return out


def _allreduce(run: RunResult) -> list[Figure]:
    ms = _ok(run, "allreduce")
    nccl = (ms[0].context.get("nccl") or {}) if ms else {}
    algorithm = ("NVLS" if nccl.get("nvls_used") else
                 "Ring" if nccl.get("nvls_available") is False else None)
    out = []
    for m in ms:
        if m.metric != "peak_busbw":
            continue
        gpus = int(m.key.get("world_size") or 1)
        on_gpu = m.key.get("backend") == "nccl"
        first = (run_gpus(run.environment) or [{}])[0] if on_gpu else {}
        out.append(Figure(f"all-reduce busbw, {gpus} ranks", "allreduce_busbw", None, m.value,
                          m.unit, str(m.key.get("backend")),
                          (first.get("name") or "GPU") if on_gpu else None,
                          {"gpus": gpus, "nodes": int(m.key.get("nodes") or 1),
                           "algorithm": algorithm}))
    return out


def headline(run: RunResult) -> list[Figure]:
    """The run's headline figures; several GPUs' figures of one name give their slowest."""
    slowest: dict[tuple[str, str | None], Figure] = {}
    count: dict[tuple[str, str | None], int] = {}
    for f in _training(run) + _devices(run) + _allreduce(run):
        k = (f.name, f.gpu)
        count[k] = count.get(k, 0) + 1
        if k not in slowest or f.value < slowest[k].value:
            slowest[k] = f
    return [replace(f, of_gpus=count[k]) for k, f in slowest.items()]
