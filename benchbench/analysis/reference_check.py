"""A run's headline figures held against the published references, and the health line.

Each headline figure (ResNet50 per precision, matmul peaks, GPU memory copy, pinned host copies,
8-GPU all-reduce busbw, GPT MFU) is matched to the references of its GPU model and metric
(references.py). When the conditions agree it reads "x–y% of the published a–b (publisher,
GPU, conditions)"; when one differs it says which; with no reference it says so. The health
line flags a run whose figures fall well below what healthy machines of its model measure, with
the causes this run's own evidence supports. Pure functions over a RunResult (no doctor import:
the caller hands the doctor's checks in).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from benchbench.analysis import derive
from benchbench.analysis.references import Reference, match
from benchbench.core import units as fmt
from benchbench.core.gpus import run_gpus
from benchbench.core.results import Measurement, RunResult

# The health rule: a figure under 85% of the lower published figure is well outside a
# healthy machine's spread; two such figures are no longer one unlucky measurement.
HEALTH_FRACTION = 0.85
HEALTH_FIGURES = 2
# Conditions held against a reference, when both sides state them: unknown is not different.
COMPARED = ("precision", "batch", "image_size", "gpus", "nodes", "counting", "copy_method",
            "algorithm")
# What a row implies without saying: ResNet-50 is published at ImageNet's 224 px, and the
# 8-GPU all-reduce figures are single-node (NVLink or NVSwitch).
IMPLIED = {"resnet50_throughput": {"image_size": 224}, "allreduce_busbw": {"nodes": 1}}
# Metrics whose precision is a condition (amp_bf16 against amp_fp16 says which differs); a
# matmul dtype is the figure itself, so a bf16 reference never stands for fp16.
PRECISION_IS_CONDITION = frozenset({"resnet50_throughput", "gpt_mfu"})
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


@dataclass(frozen=True)
class Held:
    """One reference held against a figure: the conditions that differ (none: comparable)."""

    reference: Reference
    differs: tuple[str, ...]

    def fractions(self, value: float) -> tuple[float, float]:
        """(value / high, value / low): the measured figure as a share of the published range."""
        return value / self.reference.high, value / self.reference.low


@dataclass(frozen=True)
class Row:
    figure: Figure
    held: tuple[Held, ...]  # every reference for the GPU model and metric
    text: str  # "90–96% of the published …", "conditions differ: …" or "no published …"

    @property
    def matched(self) -> list[Held]:
        return [h for h in self.held if not h.differs]

    @property
    def below(self) -> float | None:
        """measured / the lowest matched low when under HEALTH_FRACTION of it, else None."""
        lows = [h.reference.low for h in self.matched]
        if not lows:
            return None
        share = self.figure.value / min(lows)
        return share if share < HEALTH_FRACTION else None


# --- the headline figures -----------------------------------------------------------------------

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
        if m.metric == "peak_flops" and dt in MATMUL_DTYPES:
            out.append(Figure(f"matmul {dt} peak", "matmul_flops", dt, m.value, m.unit, dev,
                              _gpu(run, dev), {"gpus": 1}))
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


# --- held against the references ----------------------------------------------------------------

def differences(ref: Reference, fig: Figure) -> tuple[str, ...]:
    """'batch 1280 published, 256 here' for each compared condition both sides state."""
    published = {**IMPLIED.get(ref.metric, {}), **ref.conditions}
    if ref.metric in PRECISION_IS_CONDITION:
        published["precision"] = ref.precision
    out = []
    for k in COMPARED:
        p, m = published.get(k), fig.conditions.get(k)
        if p is not None and m is not None and str(p).lower() != str(m).lower():
            out.append(f"{k.replace('_', ' ')} {p} published, {m} here")
    return tuple(out)


def show(v: float, unit: str) -> str:
    if unit == "samples/s":
        return f"{fmt.figure(v)} img/s"
    return fmt.value(v, unit)


def published(ref: Reference) -> str:
    """The published range: '2,616–2,791 img/s', or one figure."""
    lo, hi = show(ref.low, ref.unit), show(ref.high, ref.unit)
    if lo == hi:
        return hi
    n_lo, _, u_lo = lo.partition(" ")
    n_hi, _, u_hi = hi.partition(" ")
    return f"{n_lo}–{hi}" if u_lo == u_hi else f"{lo} – {hi}"


def describe(ref: Reference, publisher: bool = True) -> str:
    """'Lambda, H100 SXM, amp_fp16, 1 GPU, synthetic data': who, which GPU, what conditions."""
    c = ref.conditions
    parts = ([ref.source.get("publisher", "?")] if publisher else []) + [ref.gpu]
    if ref.precision:
        parts.append(ref.precision)
    if c.get("batch") is not None:
        parts.append(f"batch {c['batch']}")
    elif ref.metric in PRECISION_IS_CONDITION:  # a training figure: say the batch is unknown
        parts.append("batch not stated")
    if c.get("gpus") is not None:
        parts.append(f"{c['gpus']} GPU" + ("" if c["gpus"] == 1 else "s"))
    parts += [str(c[k]) for k in ("algorithm", "copy_method") if c.get(k)]
    if c.get("counting"):
        parts.append(f"{c['counting']} counted")
    if c.get("data") not in (None, "n/a"):
        parts.append(f"{c['data']} data")
    return ", ".join(parts)


def share(held: Held, value: float) -> str:
    """'90–96%': the measured figure against the published high and low."""
    a, b = (round(x * 100) for x in held.fractions(value))
    return f"{a}%" if a == b else f"{a}–{b}%"


def _text(fig: Figure, held: list[Held]) -> str:
    if fig.gpu is None:
        return "no published reference for a CPU"
    if not held:
        what = f", {fig.precision}" if fig.precision else ""
        return f"no published reference for this GPU ({fig.gpu}{what})"
    matched = [h for h in held if not h.differs]
    if matched:
        return "; ".join(f"{share(h, fig.value)} of the published {published(h.reference)} "
                         f"({describe(h.reference)})" for h in matched)
    closest = min(held, key=lambda h: len(h.differs))
    return (f"conditions differ: {'; '.join(closest.differs)} (the closest published figure: "
            f"{published(closest.reference)}, {describe(closest.reference)})")


def row(fig: Figure) -> Row:
    """The figure held against every reference of its GPU model and metric."""
    refs = [] if fig.gpu is None else match(
        fig.gpu, fig.metric, None if fig.metric in PRECISION_IS_CONDITION else fig.precision)
    held = [Held(r, differences(r, fig)) for r in refs if r.unit == fig.unit]
    return Row(fig, tuple(held), _text(fig, held))


def rows(run: RunResult) -> list[Row]:
    """Every headline figure of the run, held against the published references."""
    return [row(f) for f in headline(run)]


# --- health -------------------------------------------------------------------------------------

class CheckLike(Protocol):
    """What health reads of a doctor check (analysis may not import the doctor)."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def measured(self) -> str: ...


class Health(NamedTuple):
    flagged: bool
    line: str
    causes: list[str]


_PROBE = {"resnet50_throughput": "resnet50", "gpt_mfu": "transformer",
          "matmul_flops": "matmul", "memory_copy_bandwidth": "memory_bandwidth",
          "h2d_bandwidth": "host_device_copy", "d2h_bandwidth": "host_device_copy",
          "allreduce_busbw": "allreduce"}


def _mig_on(g: dict[str, Any]) -> bool:
    """machine/virtualisation.gpu_sharing's {"current": bool, "pending": bool}."""
    mode = g.get("mig_mode")
    return bool(mode.get("current")) if isinstance(mode, dict) else bool(mode)


def _vgpu(g: dict[str, Any]) -> bool:
    """"vGPU guest", "vGPU host", "vSGA host": a vGPU shares the GPU; passthrough does not."""
    mode = str(g.get("virtualization_mode") or "").lower()
    return "vgpu" in mode or "vsga" in mode


def _virtualised(v: Any) -> str | None:
    """machine/virtualisation.detect's facts as a cause: a VM or a sandbox (bare metal, an
    unknown kind or a plain container is none)."""
    if not isinstance(v, dict):
        return None
    if v.get("sandbox"):
        return f"the run ran in a {v['sandbox']} sandbox, which intercepts system calls"
    if v.get("kind") == "vm":
        return (f"the host is a virtual machine ({v.get('hypervisor') or 'hypervisor unknown'})"
                ": prefer passthrough or bare metal")
    return None


def causes(run: RunResult, low: Sequence[Row], checks: Sequence[CheckLike] = ()) -> list[str]:
    """The likely causes of low figures that this run's own evidence supports."""
    out = []
    flags = (run.extra.get("telemetry") or {}).get("flags") or {}
    for probe in dict.fromkeys(_PROBE[r.figure.metric] for r in low):
        out += [f"telemetry during {probe}: {f}" for f in flags.get(probe) or []]
    for c in checks:
        if c.status in ("warn", "fail") and ("pcie" in c.name.lower()
                                             or "throttl" in c.name.lower()):
            out.append(f"doctor, {c.name} ({c.status}): {c.measured}")
    for g in run_gpus(run.environment):
        i, others = g.get("index"), g.get("other_processes") or []
        if others:
            pids = ", ".join(str(p.get("pid")) for p in others if isinstance(p, dict))
            out.append(f"GPU {i} was shared with {len(others)} other process(es) (pid {pids})")
        if _mig_on(g):
            out.append(f"GPU {i} is in MIG mode: the run measured a slice, not the whole GPU")
        if _vgpu(g):
            out.append(f"GPU {i} is a vGPU ({g['virtualization_mode']}): other VMs share it")
    host = _virtualised(run.environment.get("virtualisation"))
    return out + ([host] if host else [])


def health(run: RunResult, checks: Sequence[CheckLike] = ()) -> Health:
    """(flagged, the line, the causes): flagged when HEALTH_FIGURES or more headline figures are
    under HEALTH_FRACTION of their lower published reference. A flagged line ends by
    announcing the causes, which the caller lists after it."""
    all_rows = rows(run)
    judged = [r for r in all_rows if r.matched]
    low = [r for r in judged if r.below is not None]
    if not judged:
        why = ("no headline figure was measured" if not all_rows else
               "no published reference for a CPU" if all(r.figure.gpu is None for r in all_rows)
               else "no headline figure has a published reference under the same conditions")
        return Health(False, f"Health: not judged: {why}.", [])
    listed = ", ".join(f"{r.figure.name} at {fmt.percent(r.below or 0)}" for r in low)
    limit = f"{HEALTH_FRACTION:.0%} of the lower published figure"
    if len(low) < HEALTH_FIGURES:
        tail = (f"; one is under {limit} ({listed}), flagged only at {HEALTH_FIGURES} or more"
                if low else f", and none is under {limit}")
        return Health(False, f"Health: {len(judged)} headline figure(s) held against published "
                             f"references{tail}.", [])
    found = causes(run, low, checks)
    why = ("Likely causes in this run's evidence (listed after this line):" if found else
           "No cause found in this run's evidence (telemetry, the doctor's PCIe and throttling "
           "checks, other GPU processes, MIG, vGPU, virtualisation).")
    return Health(True, f"⚠ Health: {len(low)} of {len(judged)} headline figures are under "
                        f"{limit}: {listed}. {why}", found)
