"""A run's headline figures held against the published references, and the health line.

Each headline figure (reference_figures.py: ResNet50 per precision, matmul peaks, GPU memory
copy, pinned host copies, 8-GPU all-reduce busbw, GPT MFU) is matched to the references of its
GPU model and metric (references.py). When the conditions agree it reads "x–y% of the
published a–b (publisher, GPU, conditions)"; when one differs it gives no share but both
sides' conditions ("not compared: 128 px here, 224 px in the closest published figure (…)");
with no reference it says so. The health line flags a run whose figures fall well below what
healthy machines of its model measure, with the causes this run's own evidence supports. Pure
functions over a RunResult (no doctor import: the caller hands the doctor's checks in).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from benchbench.analysis.reference_figures import Figure, headline
from benchbench.analysis.references import Reference, match
from benchbench.core import units as fmt
from benchbench.core.gpus import run_gpus
from benchbench.core.names import counted
from benchbench.core.results import RunResult

# The health rule: a figure under 85% of the lower published figure is well outside a
# healthy machine's spread; two such figures are no longer one unlucky measurement.
HEALTH_FRACTION = 0.85
HEALTH_FIGURES = 2
# A figure this close to the line, either side, reads "borderline", neither healthy nor
# under it: one H200's bf16 matmul read 4.6% apart in two rounds and three H200s 7% apart,
# so such a figure may fall either side of the line on a rerun.
BORDERLINE_MARGIN = 0.05
# Conditions held against a reference, when both sides state them: unknown is not different.
COMPARED = ("precision", "image_size", "batch", "gpus", "nodes", "counting", "copy_method",
            "algorithm")
# What a row implies without saying: ResNet-50 is published at ImageNet's 224 px, and the
# 8-GPU all-reduce figures are single-node (NVLink or NVSwitch).
IMPLIED = {"resnet50_throughput": {"image_size": 224}, "allreduce_busbw": {"nodes": 1}}
# Metrics whose precision is a condition (amp_bf16 against amp_fp16 says which differs); a
# matmul dtype is the figure itself, so a bf16 reference never stands for fp16.
PRECISION_IS_CONDITION = frozenset({"resnet50_throughput", "gpt_mfu"})


class Differs(NamedTuple):
    """One compared condition that differs: its name, the published value and this run's."""

    condition: str
    published: Any
    here: Any


@dataclass(frozen=True)
class Held:
    """One reference held against a figure: the conditions that differ (none: comparable)."""

    reference: Reference
    differs: tuple[Differs, ...]

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
    def share(self) -> float | None:
        """measured / the lowest matched low; None with nothing matched."""
        lows = [h.reference.low for h in self.matched]
        return self.figure.value / min(lows) if lows else None

    @property
    def below(self) -> float | None:
        """The share when under HEALTH_FRACTION of the lowest matched low by more than
        BORDERLINE_MARGIN, else None."""
        s = self.share
        return s if s is not None and s < HEALTH_FRACTION - BORDERLINE_MARGIN else None

    @property
    def borderline(self) -> float | None:
        """The share when within BORDERLINE_MARGIN of HEALTH_FRACTION, either side, else
        None."""
        s = self.share
        return s if s is not None and abs(s - HEALTH_FRACTION) < BORDERLINE_MARGIN else None

    @property
    def meets(self) -> str:
        """"yes", "borderline" or "NO" against the health line; "—" with nothing to meet."""
        if not self.matched:
            return "—"
        return "NO" if self.below is not None else "borderline" if self.borderline else "yes"


def line_words() -> str:
    """How a figure meets a published reference, in the words the health line and the GPU
    check's headline both use."""
    return (f"meets it at ≥ {HEALTH_FRACTION:.0%} of the lower published figure; "
            f"{BORDERLINE_MARGIN * 100:.0f} points either side of that line, borderline")


# --- held against the references ----------------------------------------------------------------

def published_conditions(ref: Reference) -> dict[str, Any]:
    """The compared conditions a reference states or implies (ResNet-50's 224 px)."""
    out = {**IMPLIED.get(ref.metric, {}), **ref.conditions}
    if ref.metric in PRECISION_IS_CONDITION:
        out["precision"] = ref.precision
    return out


def differences(ref: Reference, fig: Figure) -> tuple[Differs, ...]:
    """Each compared condition both sides state and on which they differ."""
    published = published_conditions(ref)
    out = []
    for k in COMPARED:
        p, m = published.get(k), fig.conditions.get(k)
        if p is not None and m is not None and str(p).lower() != str(m).lower():
            out.append(Differs(k, p, m))
    return tuple(out)


def condition(name: str, v: Any) -> str:
    """One condition in words: '224 px', 'batch 256', '8 GPUs', 'read+write counted'."""
    if name == "image_size":
        return f"{v} px"
    if name == "batch":
        return f"batch {v}"
    if name == "gpus":
        return f"{v} GPU" + ("" if v == 1 else "s")
    if name == "nodes":
        return f"{v} node" + ("" if v == 1 else "s")
    if name == "counting":
        return f"{v} counted"
    if name == "algorithm":
        return f"NCCL {v}"
    return str(v)


def stated(fig: Figure) -> str:
    """The conditions the run measured a figure under: 'amp_fp16, 224 px, batch 256, 1 GPU'."""
    return ", ".join(condition(k, fig.conditions[k]) for k in COMPARED
                     if fig.conditions.get(k) is not None and (fig.gpu or k != "gpus"))


def mismatch(held: Held, which: bool = True) -> str:
    """'not compared: 128 px here, 224 px in the closest published figure (…)', without the
    figure's range and description where a table shows them beside it (which=False)."""
    here = ", ".join(condition(d.condition, d.here) for d in held.differs)
    there = ", ".join(condition(d.condition, d.published) for d in held.differs)
    ref = f" ({published(held.reference)}: {describe(held.reference)})" if which else ""
    return f"not compared: {here} here, {there} in the closest published figure{ref}"


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
    """'Lambda, H100 SXM, amp_fp16, 224 px, 1 GPU, synthetic data': who, which GPU, what
    conditions (an implied one too: ResNet-50's 224 px)."""
    c = ref.conditions
    parts = ([ref.source.get("publisher", "?")] if publisher else []) + [ref.gpu]
    if ref.precision:
        parts.append(ref.precision)
    size = published_conditions(ref).get("image_size")
    if size is not None:
        parts.append(condition("image_size", size))
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
    return mismatch(closest(held))


def closest(held: Sequence[Held]) -> Held:
    """The reference that differs from the figure in the fewest conditions."""
    return min(held, key=lambda h: len(h.differs))


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
            out.append(f"GPU {i} was shared with "
                       f"{counted(len(others), 'other process', 'other processes')} (pid {pids})")
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
    limit = (f"{HEALTH_FRACTION:.0%} of the lower published figure by more than "
             f"{BORDERLINE_MARGIN * 100:.0f} points")
    near = [r for r in judged if r.borderline is not None]
    close = (f"; borderline, within {BORDERLINE_MARGIN * 100:.0f} points of it: "
             + ", ".join(f"{r.figure.name} at {fmt.percent(r.borderline or 0)}" for r in near)
             if near else "")
    if len(low) < HEALTH_FIGURES:
        tail = (f"; one is under {limit} ({listed}), flagged only at {HEALTH_FIGURES} or more"
                if low else f", and none is under {limit}")
        return Health(False, f"Health: {counted(len(judged), 'headline figure')} held against "
                             f"published references{tail}{close}.", [])
    found = causes(run, low, checks)
    why = ("Likely causes in this run's evidence (listed after this line):" if found else
           "No cause found in this run's evidence (telemetry, the doctor's PCIe and throttling "
           "checks, other GPU processes, MIG, vGPU, virtualisation).")
    return Health(True, f"⚠ Health: {len(low)} of {len(judged)} headline figures are under "
                        f"{limit}: {listed}. {why}", found)
