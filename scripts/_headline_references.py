"""The GPU check's headline rows for the figures that published references or the datasheet
judge, each held against the rows of the GPU that ran: the published figures of its model
(analysis/references.toml, compared by analysis/reference_check under the same conditions),
else its datasheet or PCIe link as a ceiling (core/peaks.py, through analysis/derive.reference).

A figure meets a published reference where it reaches reference_check's health share
(HEALTH_FRACTION) of the lower published figure, and is borderline within its margin above it:
the rule and the words the run's health line uses (reference_check.Row.meets). The matmul row
is the sustained figure (analysis/matmul_rates.py), with its burst peak beside it. Where no
published figure of this GPU was measured under the same conditions, the row says so ("no
published reference for this GPU …", or which condition differs) and judges only what the
datasheet can: a figure over its physical ceiling is a timing error. No other figure is held
against a bar: an unsourced one would read NO on a healthy GPU of another model.
"""

from __future__ import annotations

from typing import Any

from benchbench.analysis import derive, reference_check
from benchbench.analysis.reference_figures import Figure, headline
from benchbench.analysis.references import Reference, match
from benchbench.core import units as fmt
from benchbench.core.peaks import gpu_peak
from benchbench.core.results import Measurement, RunResult

Row = tuple[str, str, str, str]  # figure, measured, reference, meets it
HEALTH = reference_check.HEALTH_FRACTION
# A figure this far over its datasheet or link ceiling was timed wrong (a clock read before
# the GPU finished, a buffer that fits in a cache); closer, rounding.
OVER_CEILING = 1.02
PRECISIONS = ("amp_bf16", "amp_fp16", "tf32", "fp32")


def yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def gpu_of(run: RunResult) -> str | None:
    """The name of the GPU that ran (cuda:0), as NVML or torch reported it."""
    return derive.gpu_name(run, "cuda:0")


def gpu_line(run: RunResult) -> str:
    """Which GPU the references are for: its name, and its row of the datasheet table."""
    name = gpu_of(run)
    if name is None:
        return "GPU: none in this run (a CPU run): no GPU reference applies"
    peak = gpu_peak(name)
    return (f"GPU: {name}; references from its own rows: the {peak.model} datasheet "
            "(core/peaks.py) and the published figures of that model (references.toml)"
            if peak else f"GPU: {name}, which the datasheet table does not know: no datasheet "
            "ceiling, published figures only where references.toml names it")


def show(v: float, unit: str) -> str:
    if unit == "ratio":
        return f"{v:.2f}"
    if unit == "s":
        return f"{v * 1e3:.1f} ms"
    if unit == "samples/s":
        return f"{v:,.0f} img/s"
    return fmt.si(v, unit)


def _measurement(run: RunResult, probe: str, metric: str, **key: Any) -> Measurement | None:
    pr = run.probe(probe)
    return next((m for m in (pr.measurements if pr else []) if m.metric == metric
                 and all(m.key.get(k) == v for k, v in key.items())), None)


def _ceiling(run: RunResult, probe: str, m: Measurement, value: float) -> tuple[str, bool]:
    """'the H200 SXM memory datasheet's 4.80 TB/s, 86% of it' for the figure `value` that
    measurement `m` stands for, and whether it is over it; empty where the datasheet table or
    the link does not say."""
    ref = derive.reference(run, probe, m)
    if ref is None:
        return "", False
    rate, what = ref
    return (f"ceiling: {what}, {fmt.si(rate, m.unit)}, {value / rate:.0%} of it",
            value > rate * OVER_CEILING)


def published(name: str, fig: Figure | None, m: Measurement | None = None,
              probe: str = "", run: RunResult | None = None) -> Row:
    """A figure against the published references of its GPU (and its datasheet ceiling
    where `m` is given): yes or NO where one was measured under the same conditions."""
    if fig is None:
        return (name, "not measured", "—", "—")
    row = reference_check.row(fig)
    ceiling, over = (_ceiling(run, probe, m, fig.value) if m is not None and run is not None
                     else ("", False))
    parts = [row.text]
    if row.matched:
        parts.append(reference_check.line_words())
    if ceiling:
        parts.append(ceiling)
    measured = show(fig.value, fig.unit) + (f" ({fig.basis})" if fig.basis else "")
    return (name, measured, "; ".join(parts).replace("|", "/"), "NO" if over else row.meets)


def _figures(run: RunResult) -> dict[str, Figure]:
    """The run's headline figures (reference_figures.py) by name: the GPU's, except ResNet50's,
    which stand for whatever device trained."""
    return {f.name: f for f in headline(run)
            if f.gpu is not None or f.name.startswith("ResNet50 ")}


def reference_rows(run: RunResult) -> list[Row]:
    """matmul bf16 and fp32, the GPU memory copy, the pinned copies and ResNet50 per
    precision, each against its GPU's own references."""
    figs = _figures(run)
    rows = [published("matmul bf16", figs.get("matmul bf16"),
                      _measurement(run, "matmul", "peak_flops", device="cuda:0", dtype="bf16"),
                      "matmul", run)]
    fp32 = _measurement(run, "matmul", "peak_flops", device="cuda:0", dtype="fp32")
    ref = derive.reference(run, "matmul", fp32) if fp32 else None
    if fp32 is None:
        rows.append(("matmul fp32 peak (TF32 off)", "not measured", "—", "—"))
    elif ref is None:
        rows.append(("matmul fp32 peak (TF32 off)", show(fp32.value, fp32.unit),
                     f"no datasheet fp32 rate for this GPU ({gpu_of(run)})", "—"))
    else:
        rows.append(("matmul fp32 peak (TF32 off)", show(fp32.value, fp32.unit),
                     f"≤ {fmt.si(ref[0], 'FLOP/s')} ({ref[1]}, without tensor cores): over "
                     "it, TF32 ran", yes(fp32.value <= ref[0] * OVER_CEILING)))
    rows.append(published("GPU memory copy", figs.get("GPU memory copy"),
                          _measurement(run, "memory_bandwidth", "copy_bandwidth",
                                       memory="cuda:0"), "memory_bandwidth", run))
    for way in ("h2d", "d2h"):
        rows.append(published(f"pinned {way.upper()}", figs.get(f"pinned {way} copy"),
                              _measurement(run, "host_device_copy", "peak_bandwidth",
                                           device="cuda:0", direction=way, memory="pinned"),
                              "host_device_copy", run))
    rows += [published(f"ResNet50 {p}", figs.get(f"ResNet50 {p}")) for p in PRECISIONS]
    return rows


def mfu_reference(run: RunResult, band: tuple[float, float]) -> str:
    """The MFU band's text, naming the GPU's dense bf16 peak it is a share of."""
    peak = gpu_peak(gpu_of(run))
    of = (f"the {peak.model}'s dense bf16 peak ({fmt.si(peak.bf16, 'FLOP/s')})"
          if peak and peak.bf16 else "the GPU's dense bf16 peak")
    return (f"{band[0]:g}-{band[1]:g} of {of}: eager gpt2-124m at 16 x 1024 tokens (0.45+ is "
            "tuned, compiled code; see the docstring)")


def _ratio_range(fp8: list[Reference], bf16: list[Reference]) -> tuple[float, float, str]:
    """The published fp8 ÷ bf16 matmul ratio: from one publisher's pair where there is one."""
    pairs = [(a, b) for a in fp8 for b in bf16
             if a.source.get("publisher") == b.source.get("publisher")] or \
        [(a, b) for a in fp8 for b in bf16]
    lo = min(a.low / b.high for a, b in pairs)
    hi = max(a.high / b.low for a, b in pairs)
    a, b = pairs[0]
    who = (f"{a.source.get('publisher')}: " if a.source.get("publisher") ==
           b.source.get("publisher") else "")
    fp8 = f"fp8 {reference_check.published(a)}" + ("" if who else
                                                     f" ({a.source.get('publisher')})")
    bf16 = f"bf16 {reference_check.published(b)}"
    return lo, hi, f"{who}{fp8} ÷ {bf16}" + ("" if who else f" ({b.source.get('publisher')})")


def matmul_fp8_reference(run: RunResult) -> tuple[str, float | None]:
    """The fp8 ÷ bf16 matmul reference of the GPU that ran, and the least ratio that meets it
    (None: nothing published to meet)."""
    name = gpu_of(run)
    if name is None:
        return "no GPU ran: no published fp8 ÷ bf16 matmul ratio applies", None
    fp8, bf16 = match(name, "matmul_flops", "fp8"), match(name, "matmul_flops", "bf16")
    if fp8 and bf16:
        lo, hi, how = _ratio_range(fp8, bf16)
        span = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"
        return (f"{span} published for the {fp8[0].gpu} ({how}); meets it at ≥ {HEALTH:.0%} "
                f"of {lo:.2f}x", HEALTH * lo)
    peak = gpu_peak(name)
    sheet = (f"; the {peak.model} datasheet's dense fp8 ÷ bf16 is {peak.fp8 / peak.bf16:.2f}x"
             if peak and peak.fp8 and peak.bf16 else "")
    return f"no published fp8 and bf16 matmul figures for this GPU ({name}){sheet}", None
