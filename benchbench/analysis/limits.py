"""Physical limits: the most each measurement can physically be on the machine that ran it, and
the measurements beyond it, which are timing errors, not results.

Each limit comes from the machine's own facts: a matmul against its dtype's datasheet peak, a
GPU memory copy against the memory's datasheet rate, a host-GPU copy against the PCIe link NVML
read, an all-reduce against the link its GPUs share, a training or inference rate against the
FLOPs its model needs at the dtype's peak, a memory peak against the device's memory. A figure
the machine's facts set no limit for (a CPU's matmul, a data loader, storage) has none here.
`screened` gives the run without its figures beyond their limits, each listed with its limit,
so that no verdict, table, plot or comparison takes a timing error for a result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from benchbench.core import units as fmt
from benchbench.core.flops import resnet50_flops_per_image
from benchbench.core.peaks import PRECISION_DTYPE, GpuPeak, gpu_peak, pcie_rate
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.machine.topology import link_for

# Over its limit by more than this, a figure was timed wrong (a clock read before the GPU
# finished, a buffer that fits in a cache, nothing moved); within it, rounding of the limit.
OVER_LIMIT = 1.02
ERRORS_KEY = "measurement_errors"
_TRAINING = {"resnet50": ("throughput",), "pipeline": ("total_throughput", "compute_throughput"),
             "ddp_scaling": ("throughput",)}
_INFERENCE = ("offline_throughput", "peak_offline_throughput", "loadgen_offline_throughput",
              "server_throughput")
_MEMORY_PEAKS = {("resnet50", "peak_memory"), ("transformer", "peak_memory"),
                 ("memory_fit", "step_peak_memory")}


@dataclass(frozen=True)
class Limit:
    """The most a measurement can be, in its own unit, and the fact that sets it."""

    value: float
    what: str  # "H200 SXM dense bf16 peak (990 TFLOP/s)"


def _gpus(run: RunResult) -> list[dict[str, Any]]:
    return [g for g in run.environment.get("gpus") or [] if isinstance(g, dict)]


def _gpu(run: RunResult, device: Any) -> dict[str, Any] | None:
    """The NVML record of `device` ("cuda:1"), or of GPU 0 for a probe that names none."""
    gpus = _gpus(run)
    if not gpus:
        return None
    dev = str(device or "cuda:0")
    if not dev.startswith("cuda"):
        return None
    index = int(dev.partition(":")[2] or 0)
    return next((g for g in gpus if g.get("torch_index", g.get("index")) == index), gpus[0])


def _peak(run: RunResult, m: Measurement, device: Any) -> GpuPeak | None:
    if not str(device or "cuda").startswith("cuda"):
        return None
    g = _gpu(run, device)
    return gpu_peak(m.context.get("gpu_name") or (g or {}).get("name"))


def _dtype_peak(peak: GpuPeak, dtype: str) -> tuple[float, str] | None:
    """The dtype's dense peak; for fp32 the larger of fp32 and TF32 (cuDNN and cuBLAS may run
    TF32 unless told not to, so fp32 work is bounded by TF32's rate, not by fp32's)."""
    if dtype == "fp32" and peak.tf32:
        return max(peak.fp32, peak.tf32), f"the {peak.model} dense tf32 peak"
    flops = peak.flops(dtype)
    return (flops, f"the {peak.model} dense {dtype} peak") if flops else None


def _of(value: float, unit: str, what: str) -> Limit:
    return Limit(value, f"{what} ({fmt.value(value, unit)})")


def _flops_limit(run: RunResult, m: Measurement, dtype: str, flops_per: float, device: Any,
                 per: str, n: int = 1) -> Limit | None:
    peak = _peak(run, m, device)
    top = _dtype_peak(peak, dtype) if peak else None
    if top is None or flops_per <= 0:
        return None
    gpus = f" × {n} GPUs" if n > 1 else ""
    return _of(n * top[0] / flops_per, m.unit,
               f"{top[1]}{gpus} ÷ {fmt.si(flops_per, 'FLOP')} a {per}")


def _training(run: RunResult, m: Measurement) -> Limit | None:
    precision = str(m.key.get("precision") or "amp_bf16")
    size = int(m.key.get("image_size") or 224)
    n = int(m.key.get("ranks") or 1)
    return _flops_limit(run, m, PRECISION_DTYPE.get(precision, "bf16"),
                        resnet50_flops_per_image(size, training=True),
                        m.key.get("device") or m.context.get("device"), "training image", n)


def _inference(run: RunResult, m: Measurement) -> Limit | None:
    dtype = {"fp32": "fp32", "fp16": "fp16", "fp8": "fp8"}.get(str(m.key.get("precision")),
                                                                "bf16")
    return _flops_limit(run, m, dtype,
                        resnet50_flops_per_image(int(m.key.get("image_size") or 224),
                                                 training=False),
                        m.context.get("device"), "forward pass")


def _transformer(run: RunResult, pr: ProbeResult, m: Measurement) -> Limit | None:
    per_token = next((x.value for x in pr.measurements if x.metric == "flops_per_token"
                      and x.key.get("preset") == m.key.get("preset")
                      and x.key.get("seq_len") == m.key.get("seq_len")), None)
    if per_token is None:
        return None
    return _flops_limit(run, m, PRECISION_DTYPE.get(str(m.key.get("precision")), "bf16"),
                        per_token, m.key.get("device"), "token")


def _copy(run: RunResult, m: Measurement) -> Limit | None:
    """A host-GPU copy against the PCIe link NVML read (during the probe, else at the
    snapshot); all GPUs at once against the sum of their links."""
    if m.key.get("device") == "all":
        rates = [pcie_rate(g.get("pcie_gen_current"), g.get("pcie_width_current"))
                 for g in _gpus(run)]
        if not rates or None in rates:
            return None
        return _of(sum(r for r in rates if r), m.unit, f"the {len(rates)} GPUs' PCIe links")
    g = {**(_gpu(run, m.key.get("device")) or {}), **m.context}
    gen, width = g.get("pcie_gen_current"), g.get("pcie_width_current")
    rate = pcie_rate(gen, width)
    return _of(rate, m.unit, f"the PCIe Gen{gen} x{width} link's rate") if rate else None


def _allreduce(run: RunResult, pr: ProbeResult, m: Measurement) -> Limit | None:
    """busbw against the per-direction rate of the slowest link among the ranks' GPUs (twice
    it where NCCL reduced in the switch: NVLS or SHARP halve what crosses a link); algbw
    against that times n / 2(n - 1). One node and NCCL only: elsewhere no link rate is read."""
    n = int(pr.params.get("world_size") or 1)
    if n < 2 or int(m.key.get("nodes") or 1) > 1 or pr.params.get("backend") != "nccl":
        return None
    link = link_for(run.environment.get("topology"), n)
    if not link or not link.get("per_direction"):
        return None
    nccl = m.context.get("nccl") or {}
    in_switch = bool(nccl.get("nvls_used") or any("CollNet" in t for t in
                                                   nccl.get("transports") or []))
    bus = link["per_direction"] * (2 if in_switch else 1)
    what = f"the {link['path']} link between GPUs {link['a']} and {link['b']}, per direction" + (
        ", twice for in-switch reduction" if in_switch else "")
    if m.metric == "algbw":
        return _of(bus * n / (2 * (n - 1)), m.unit, f"the busbw limit of {what} × n/2(n-1)")
    return _of(bus, m.unit, what)


def limit(run: RunResult, pr: ProbeResult, m: Measurement) -> Limit | None:
    """The most `m` can physically be on the machine that ran it; None where its facts set
    no limit."""
    probe = pr.name
    if probe in ("matmul", "stability") and m.metric in ("flops", "peak_flops",
                                                         "sustained_flops"):
        peak = _peak(run, m, m.key.get("device"))
        top = _dtype_peak(peak, str(m.key.get("dtype"))) if peak else None
        return _of(top[0], m.unit, top[1]) if top else None
    if probe == "memory_bandwidth" and m.key.get("memory", "host") != "host":
        peak = _peak(run, m, m.key.get("memory"))
        return (_of(peak.memory_bandwidth, m.unit, f"the {peak.model} memory's datasheet rate")
                if peak else None)
    if probe == "host_device_copy" and m.unit == "B/s":
        return _copy(run, m)
    if probe in _TRAINING and m.metric in _TRAINING[probe]:
        return _training(run, m)
    if probe == "transformer" and m.metric == "throughput":
        return _transformer(run, pr, m)
    if probe == "inference" and m.metric in _INFERENCE:
        return _inference(run, m)
    if probe == "allreduce" and m.metric in ("algbw", "busbw", "peak_busbw"):
        return _allreduce(run, pr, m)
    if (probe, m.metric) in _MEMORY_PEAKS and m.unit == "B":
        g = _gpu(run, m.key.get("device") or m.context.get("device"))
        total = (g or {}).get("memory_total")
        return _of(float(total), "B", "the GPU's memory") if total else None
    return None


def beyond(run: RunResult, pr: ProbeResult, m: Measurement) -> Limit | None:
    """The limit `m` is beyond (a timing error), or None where it is within its limit or has
    none. Only rates and sizes that grow with speed have one; times are left alone."""
    if not m.higher_is_better and m.unit != "B":
        return None
    lim = limit(run, pr, m)
    return lim if lim is not None and m.value > lim.value * OVER_LIMIT else None


def error_text(m: Measurement, lim: Limit) -> str:
    """'measurement error: 1.6× the H200 SXM dense bf16 peak (990 TFLOP/s), a timing error,
    not a result'."""
    return (f"measurement error: {m.value / lim.value:.1f}× {lim.what}, more than the "
            "hardware can do: a timing error, not a result")


def screened(run: RunResult) -> RunResult:
    """The run without its measurements beyond their physical limits; each is listed in
    extra["measurement_errors"] (probe, metric, key, value, unit, limit, what, text)."""
    errors: list[dict[str, Any]] = []
    probes = []
    for pr in run.probes:
        kept = []
        for m in pr.measurements:
            lim = beyond(run, pr, m)
            if lim is None:
                kept.append(m)
                continue
            errors.append({"probe": pr.name, "metric": m.metric, "key": m.key,
                           "value": m.value, "unit": m.unit, "limit": lim.value,
                           "what": lim.what, "text": error_text(m, lim)})
        probes.append(dataclasses.replace(pr, measurements=kept)
                      if len(kept) != len(pr.measurements) else pr)
    if not errors:
        return run
    return dataclasses.replace(run, probes=probes,
                               extra={**run.extra, ERRORS_KEY: errors})


def errors(run: RunResult, probe: str | None = None) -> list[dict[str, Any]]:
    """The measurement errors `screened` set aside (of one probe, with `probe`)."""
    found = run.extra.get(ERRORS_KEY) or []
    return [e for e in found if probe is None or e["probe"] == probe]
