"""The verdict's advice: what would lift the limiting resource, each line resting on a
measurement of the workload it speaks of.

Pure functions over a RunResult and the capacities verdict.py computed. A resource is named
by its human name (core/names.py); ids stay in results.json's fields.
"""

from __future__ import annotations

import math

from benchbench.analysis import capacities as cap
from benchbench.analysis.derive import AU_PASS, precision_speedups
from benchbench.core import interruption
from benchbench.core.names import precision_name, resource_name
from benchbench.core.results import RunResult
from benchbench.core.units import figure

COMPUTE = ("gpu_compute", "cpu_compute")
MODELS = {"resnet50": "ResNet50", "transformer": "the transformer"}
# A mixed-precision speedup below this is within what a run's noise and the cast overhead give:
# not worth a change of recipe.
AMP_WORTH = 1.2


def model_name(workload: str) -> str:
    return MODELS.get(workload, workload)


def advice(run: RunResult, limiting: str, caps: dict[str, cap.Capacity], s: cap.Setting,
           compute: float | None) -> list[str]:
    """What would lift `limiting`, the most useful first."""
    c = caps[limiting]
    out: list[str] = []
    unit = s.unit
    if limiting in COMPUTE:
        others = {r: x.value for r, x in caps.items() if x.value and r not in COMPUTE}
        if others:
            nxt = min(others, key=lambda r: others[r])
            should = ", as it should be" if limiting == "gpu_compute" else ""
            # "next limit" is the phrase the terminal's summary skips (it has its own line).
            ratio = others[nxt] / (c.value or 1)
            times = f"{ratio:.1f}×" if ratio < 10 else f"{ratio:,.0f}×"
            out.append(f"Compute is the bottleneck{should}: the next limit, "
                       f"{resource_name(nxt)}, could feed {figure(others[nxt])} {unit}, "
                       f"{times} what compute uses.")
        if limiting == "cpu_compute":
            out.append("This machine trains on its CPU: any CUDA GPU raises the compute "
                       "capacity by orders of magnitude, and the input side measured here "
                       "shows how fast a GPU it could feed.")
        amp = amp_advice(run, s)
        if amp:
            out.append(amp)
    elif limiting == "cpu_dataloading":
        out += loader_advice(run, compute, unit)
    elif limiting == "storage":
        if compute and s.per_device and c.value:
            feeds = c.value / (s.per_device / AU_PASS)
            device = "GPU" if s.device == "cuda" else "CPU"
            out.append(f"Storage feeds {feeds:.2g} {device}{'' if f'{feeds:.2g}' == '1' else 's'}"
                       f" of this type at ≥ {AU_PASS:.0%} AU; {compute / c.value:.1f}× "
                       "its rate is needed: RAID0 across more NVMe drives, or staging the "
                       "dataset to local SSD, would lift it.")
        out.append("A training set that fits in RAM is read from storage only in the first "
                   "epoch: more RAM, or a smaller/sharded set per node, removes this limit.")
    elif limiting == "host_device_link":
        out.append("Ship uint8 images and normalise on the GPU: a quarter of the bytes of "
                   "float32 cross the link; use pinned memory (pin_memory=True).")
        out.append("Check that every GPU's PCIe link trains to its maximum generation and width "
                   "under load (see the doctor).")
    elif limiting == "interconnect":
        out.append("Gradient exchange limits scaling: NVLink/NVSwitch between GPUs, faster NICs "
                   "between nodes, a larger batch per GPU or gradient accumulation each cut "
                   "its share of a step.")
    return out


def amp_advice(run: RunResult, s: cap.Setting) -> str | None:
    """'Train in mixed precision' only from the judged workload's own speedup. Another model's
    speedup is said as that model's, with why this one's was not measured."""
    if s.precision not in ("fp32", "tf32"):
        return None  # already judged in a mixed precision, or nothing measured
    rows = [sp for sp in precision_speedups(run) if sp["ratio"].startswith("amp")]
    own = [sp for sp in rows if sp["model"] == s.workload]
    if own:
        best = max(own, key=lambda sp: (sp["ratio"].endswith(f"/{s.precision}"),
                                        sp["measured"]))
        if best["measured"] <= AMP_WORTH:
            return None
        return (f"{model_name(s.workload)} trained {best['measured']:.2f}× faster in "
                f"{_speedup_words(best['ratio'])}: train it in mixed precision (AMP).")
    other = max((sp for sp in rows if sp["measured"] > AMP_WORTH),
                key=lambda sp: sp["measured"], default=None)
    if other is None:
        return None
    name = model_name(other["model"])
    return (f"{name[0].upper() + name[1:]} trained {other['measured']:.2f}× faster in "
            f"{_speedup_words(other['ratio'])}; {model_name(s.workload)}'s mixed precision "
            f"was not measured, because {amp_missing(run, s.workload)}: measure it before "
            "changing its recipe.")


def _speedup_words(ratio: str) -> str:
    """'amp_bf16/fp32' → 'mixed precision (bf16) than in fp32'."""
    num, _, den = ratio.partition("/")
    return f"{precision_name(num)} than in {precision_name(den)}"


def amp_missing(run: RunResult, workload: str) -> str:
    """Why a training probe has no mixed-precision figure: its own skip reason for it, else
    the precisions it was asked for."""
    pr = run.probe(workload)
    if pr is None:
        return f"the {workload} probe did not run"
    clauses = [c.strip() for c in (pr.reason or "").split(";")]
    said = next((c for c in clauses if c.startswith("amp")), None)
    if said:
        return said
    if pr.status != "ok":
        return interruption.outcome(run, pr)
    asked = [str(p) for p in pr.params.get("precisions") or []]
    if asked and not any(p.startswith("amp") for p in asked):
        return (f"this run asked only for {', '.join(asked)} (`{workload}.precisions`; "
                "--quick on a CPU trains in fp32 only)")
    return "it measured no mixed-precision throughput"


def loader_advice(run: RunResult, compute: float | None, unit: str) -> list[str]:
    """What would feed the step: a faster loader this run measured, the cores the measured
    rate per core needs, decoding on the GPU, uint8 batches, smaller images."""
    out = []
    dl = cap.ok_probe(run, "dataloader")
    by_loader: dict[str, float] = {}
    for m in cap.metric(dl, "throughput"):
        by_loader[m.key["loader"]] = max(by_loader.get(m.key["loader"], 0.0), m.value)
    tv, best = by_loader.get("torchvision"), max(by_loader.items(), key=lambda kv: kv[1],
                                                 default=(None, 0.0))
    if tv and best[0] and best[0] != "torchvision" and best[1] > tv * 1.1:
        out.append(f"{best[0]} measured {figure(best[1])} img/s vs {figure(tv)} for torchvision: "
                   "switch.")
    need = cap.cores_to_feed(run, compute)
    cores = (run.environment.get("host") or {}).get("cores_usable")
    if need is not None and compute and cores and need[0] > cores:
        n, per_core = need
        out.append(f"At the measured {figure(per_core.value)} img/s per core "
                   f"({per_core.key.get('loader')}), feeding {figure(compute)} {unit} takes "
                   f"{math.ceil(n)} cores plus 1–2 for training: this machine has {cores}.")
    if str(run.config.get("device_resolved")) == "cuda" and "dali_gpu" not in by_loader:
        out.append("Decode on the GPU with NVIDIA DALI (nvJPEG): it takes most of the decoding "
                   f"off the CPU; it was not measured here, because {_dali_gpu_missing(run)}.")
    out.append("Ship uint8 batches and normalise on the GPU: a quarter of the bytes to collate, "
               "pin and copy, and no float work on the CPU (NVIDIA's DeepLearningExamples "
               "loaders do so).")
    out.append("Pre-resize the images offline (decode cost grows with pixels) or cache "
               "decoded samples, if the recipe allows.")
    return out


def _dali_gpu_missing(run: RunResult) -> str:
    """The dataloader probe's own reason for leaving dali_gpu out, else what it was asked."""
    pr = run.probe("dataloader")
    if pr is None:
        return "the dataloader probe did not run"
    said = _clause(pr.reason or "", "dali_gpu skipped, because ")
    if said:
        return said
    loaders = [str(x) for x in pr.params.get("loaders") or []]
    return (f"this run measured {', '.join(loaders)} only (`dataloader.loaders`)" if loaders
            else "the dataloader probe measured no DALI loader")


def _clause(reason: str, start: str) -> str | None:
    """The note of a probe's reason (its notes joined by '; ') that begins with `start`,
    without it: a note's own '; ' inside parentheses does not end it."""
    at = reason.find(start)
    if at < 0:
        return None
    out, depth = [], 0
    for part in reason[at + len(start):].split("; "):
        out.append(part)
        depth += part.count("(") - part.count(")")
        if depth <= 0:
            break
    return "; ".join(out)
