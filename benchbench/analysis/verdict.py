"""The verdict: which resource limits training on this machine, the evidence, and the fix.

Pure functions over a RunResult (no torch). Every capacity is in the workload's samples/s for
the whole machine (capacities.py); the lowest one limits training. The real input pipeline,
measured end to end by `pipeline`, arbitrates between compute and the input side, because on
a CPU box the loader and the training step share the same cores. The verdict is about the
user's real training set (ImageNet-1k unless analysis.* says otherwise), not the sample the
probes read: a set larger than RAM is read from storage every epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.analysis import capacities as cap
from benchbench.analysis import reference_check
from benchbench.analysis.advice import advice
from benchbench.analysis.config import (
    IMAGENET_MEAN_FILE_BYTES,
    IMAGENET_SAMPLES,
    WORKLOADS,
    AnalysisConfig,
)
from benchbench.analysis.derive import (
    ANALYSIS_VERSION,
    AU_PASS,
    accelerator_utilisation,
)
from benchbench.analysis.verdict_types import (
    Constraint,
    FirstEpoch,
    JudgedDataset,
    Verdict,
    WorkloadVerdict,
)
from benchbench.core.gpus import run_gpus
from benchbench.core.names import resource_name
from benchbench.core.results import RunResult
from benchbench.core.stats import summarize
from benchbench.core.units import figure

INPUT_SIDE = ("cpu_dataloading", "storage", "host_memory", "host_device_link")
# The pipeline takes its batches from the loader the dataloader probe measured alone, so it
# cannot train faster than that loader delivers. Beyond this ratio (the loader's rounds spread
# by up to ~10% on an H200) the two figures disagree, and the evidence says so.
LOADER_DISAGREES = 1.15


def analysis_config(run: RunResult, workload: str | None = None) -> AnalysisConfig:
    values = dict((run.config.get("overrides") or {}).get("analysis") or {})
    if workload:
        values["workload"] = workload
    return AnalysisConfig(**values)


def _pipeline_check(run: RunResult, s: cap.Setting) -> dict[str, Any] | None:
    """The real pipeline's AU at the setting, when `pipeline` ran it (ResNet50 only), with the
    share of each step spent waiting for data."""
    if s.workload != "resnet50":
        return None
    rows = [r for r in accelerator_utilisation(run) if r["key"].get("precision") == s.precision]
    best = max(rows, key=lambda r: r["total_ips"], default=None)
    if best is None:
        return None
    pr = cap.ok_probe(run, "pipeline")
    wait = next((m.value for m in cap.metric(pr, "data_wait") if m.key == best["key"]), None)
    work = next((m.value for m in cap.metric(pr, "compute_time") if m.key == best["key"]), None)
    share = wait / (wait + work) if wait is not None and work and wait + work > 0 else None
    return {**best, "wait_share": share}


def _decide(caps: dict[str, cap.Capacity], pipe: dict[str, Any] | None, compute: str
            ) -> tuple[str | None, list[str]]:
    known = {r: c.value for r, c in caps.items() if c.value is not None}
    if not known:
        return None, []
    limiting = min(known, key=lambda r: known[r])
    notes = []
    if pipe is not None and pipe.get("partial_round"):
        # Seen on an H200: 3 timed steps of 16 workers read AU 0.93 in one run (a burst of
        # ready batches overruled the loader's 3,022 images/s) and 0.54 in the next.
        notes.append(f"the real pipeline timed {pipe['steps']} steps, under one round of its "
                     f"{pipe['round']} workers: a burst of batches they finished together or "
                     "the wait for the next round, not the loader's rate, so it does not "
                     "decide; the separate capacities do")
    elif pipe is not None:
        inputs = {r: v for r, v in known.items() if r in INPUT_SIDE and r != "storage"}
        # Input-bound only when the steps really waited for data: a low AU with no wait means
        # the loader's threads slowed the step itself (on a CPU box they share the cores).
        waited = pipe.get("wait_share") is None or pipe["wait_share"] >= 1 - AU_PASS
        if pipe["au"] < AU_PASS and limiting == compute and inputs and waited:
            limiting = min(inputs, key=lambda r: inputs[r])
            notes.append("the real pipeline waited for data although the loader alone was "
                         "faster than compute: both compete for the same cores")
        elif pipe["au"] < AU_PASS and limiting == compute and not waited:
            notes.append(f"the steps waited for data only {pipe['wait_share']:.1%} of the "
                         f"time: the AU shortfall is the loader's threads slowing the training "
                         "step on shared cores, so compute still limits")
        elif pipe["au"] >= AU_PASS and limiting == "cpu_dataloading":
            rest = {r: v for r, v in known.items() if r != "cpu_dataloading"}
            limiting = min(rest, key=lambda r: rest[r]) if rest else limiting
            notes.append("the real pipeline kept the device busy at its configuration, so "
                         "the loader's lower figure on its own does not limit training")
            over = pipe["total_ips"] / known["cpu_dataloading"]
            if over > LOADER_DISAGREES:
                notes.append(f"the two disagree: the pipeline trained on "
                             f"{figure(pipe['total_ips'])} images/s from the loader, "
                             f"{over:.2f}× what it delivered alone, so one of the two figures "
                             "is off; the verdict follows the pipeline, which ran the loader and "
                             "the step together")
    return limiting, notes


def _constraints(run: RunResult, s: cap.Setting) -> list[Constraint]:
    if s.device != "cuda":
        return [Constraint("GPU memory fit", "not applicable", "the CPU trains in host memory")]
    out = []
    gpus = run_gpus(run.environment)
    total = gpus[0].get("memory_total") if gpus else None
    for probe in ("resnet50", "transformer", "pipeline"):
        for m in cap.metric(cap.ok_probe(run, probe), "peak_memory"):
            backoff = m.context.get("oom_backoff") or []
            check = f"{probe} {m.key.get('precision')} batch {m.context.get('batch')}"
            if backoff:
                out.append(Constraint(
                    check, "does not fit", f"batch {', '.join(map(str, backoff))} ran out of "
                    f"memory; it ran at {m.context.get('batch')}", m.value, total))
            elif total:
                head = 1 - m.value / total
                out.append(Constraint(
                    check, "tight" if head < 0.1 else "ok", f"peak {m.value / 2**30:.1f} GiB "
                    f"of {total / 2**30:.0f} GiB: {head:.0%} headroom", m.value, total, head))
            else:
                out.append(Constraint(check, "unknown", "GPU memory size not recorded",
                                      m.value, total))
    return out


@dataclass(frozen=True)
class TrainingSet:
    """The training set the verdict judges, and where its size came from."""

    samples: int
    bytes: int
    name: str  # "your dataset at /data/imagenet-subset", "ImageNet-1k's training set"
    basis: str  # where the figures came from


def training_set(run: RunResult, acfg: AnalysisConfig) -> TrainingSet:
    """analysis.dataset_samples/dataset_bytes when set; else the user's --data-dir as scanned;
    else ImageNet-1k, which the synthetic sample stands in for."""
    data = run.extra.get("dataset") or {}
    user = data.get("source") == "user" and data.get("num_images")
    if user:
        samples, size = int(data["num_images"]), int(data.get("total_bytes") or 0)
        name, basis = f"your dataset at {data.get('path')}", "scanned from --data-dir"
    else:
        samples, size = IMAGENET_SAMPLES, IMAGENET_SAMPLES * IMAGENET_MEAN_FILE_BYTES
        name = "ImageNet-1k's training set"
        # The name says ImageNet-1k; the basis says why it is judged, without repeating it.
        basis = ("the default without --data-dir; the synthetic sample stands in for it"
                 if data.get("source") == "generated" else "the default without --data-dir")
    if acfg.dataset_samples is not None or acfg.dataset_bytes is not None:
        mean = data.get("mean_file_size") or size / max(samples, 1)
        if acfg.dataset_samples is not None and acfg.dataset_bytes is None:
            size = int(acfg.dataset_samples * mean)
        samples = acfg.dataset_samples if acfg.dataset_samples is not None else samples
        size = acfg.dataset_bytes if acfg.dataset_bytes is not None else size
        name = "the training set you described"
        basis = "analysis.dataset_samples / analysis.dataset_bytes"
    return TrainingSet(samples, max(1, size), name, basis)


def _au_note(run: RunResult, pipe: dict[str, Any], rates: bool = True) -> str:
    """AU as a reader should take it: above 100% is noise or a faster real step, never a
    bare figure. `rates=False` leaves out the two rates, for a sentence that gave them."""
    au = pipe["au"]
    if au <= 1.0:
        return f"AU {au:.0%}"
    pr = cap.ok_probe(run, "pipeline")
    total = next((m for m in cap.metric(pr, "total_throughput") if m.key == pipe["key"]), None)
    comp = next((m for m in cap.metric(pr, "compute_throughput") if m.key == pipe["key"]),
                None)
    if total is not None and comp is not None and len(total.samples) > 1 and \
            len(comp.samples) > 1:
        t, c = summarize(total.samples), summarize(comp.samples)
        if t.minimum <= c.maximum:
            return (f"AU 100% (measured {au:.1%}: within noise, the real steps' rates "
                    f"{t.minimum:,.1f}–{t.maximum:,.1f} overlap the synthetic ones' "
                    f"{c.minimum:,.1f}–{c.maximum:,.1f})")
    told = (f", {pipe['total_ips']:,.1f} against {pipe['compute_ips']:,.1f} images/s" if rates
            else "")
    return (f"AU 100% (measured {au:.1%}: the real steps ran faster than the synthetic ones"
            f"{told}, beyond their spread; a pipeline cannot train faster than its step, so it "
            "counts as 100%)")


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def capacity_line(resource: str, rest: str) -> str:
    """An evidence line that restates one capacity: 'CPU compute: 12.3 images/s — …'.
    Renderers that show the capacity table leave these out (reports/verdict.py)."""
    name = resource_name(resource)
    return f"{name[0].upper() + name[1:]}: {rest}"


def _by_relevance(said: list[tuple[str, str]], limiting: str | None, compute: str
                  ) -> list[str]:
    """The limit's own evidence first, then what decided it (the real pipeline, where the
    limit is compute or the loader, which it arbitrates), then the rest, then the caveat."""
    def rank(about: str) -> int:
        if about == limiting:
            return 0
        if about == "decision" or (about == "pipeline"
                                   and limiting in (compute, "cpu_dataloading")):
            return 1
        return 3 if about == "caveat" else 2
    return [text for _, text in sorted(said, key=lambda at: rank(at[0]))]


def workload_verdict(run: RunResult, workload: str, acfg: AnalysisConfig) -> WorkloadVerdict:
    # Bytes per image: the measured sample's own files (the loader's and the cold-read
    # figures are for those), else the real set's mean. The set's total size decides only
    # whether it fits in RAM.
    ts = training_set(run, acfg)
    measured = (run.extra.get("dataset") or {}).get("mean_file_size")
    mean_file = measured or ts.bytes / ts.samples
    s = cap.setting(run, workload, mean_file)
    comp = cap.compute(run, s)
    caps = {comp.resource: comp, "cpu_dataloading": cap.data_loading(run, s)}
    store = cap.storage(run, s)
    fits, ram = cap._fits_in_ram(run, ts.bytes)
    first_epoch = None
    said: list[tuple[str, str]] = []  # (what a line is about: a resource or a _RANK key, it)
    # The set's name and size; where the figures came from is the dataset line's to say.
    described = f"{ts.name} ({ts.samples:,} images, {ts.bytes / 1e9:,.3g} GB)"
    if workload == "resnet50" and fits:
        caps["host_memory"] = cap.host_memory(run, s)
        first_epoch = FirstEpoch(
            "storage", store.value, f"{described} fits in the {(ram or 0) / 2**30:.0f} GiB of "
            f"free RAM: storage ({store.how or store.missing}) limits only the first epoch, "
            "then the page cache carries it")
        said.append(("storage", _sentence(first_epoch.detail)))
    else:
        caps["storage"] = store
        if workload == "resnet50" and ram:
            said.append(("storage", _sentence(
                f"{described} does not fit in the {ram / 2**30:.0f} GiB of free RAM: every "
                "epoch reads it from storage, judged by its cold read rate")))
    if s.compute_scale != 1.0 and comp.value is not None:
        said.append((comp.resource, f"The compute figure was measured at {s.compute_image} px "
                     f"and the loader at {s.image_size} px: compute is compared at "
                     f"{s.image_size} px, scaled by pixel count (×{s.compute_scale:.3g}); the "
                     "real pipeline below compares the loader and the step at one size."))
    caps["host_device_link"] = cap.host_device_link(run, s)
    caps["interconnect"] = cap.interconnect(run, s, comp)
    pipe = _pipeline_check(run, s)
    rated = pipe if pipe is not None and not pipe.get("partial_round") else None
    limiting, notes = _decide(caps, pipe, comp.resource)
    if comp.value is None and limiting is not None:
        # Without the compute capacity there is nothing to hold the others against: name
        # no bottleneck rather than the lowest of what happened to be measured.
        notes.append(f"the lowest measured capacity is {resource_name(limiting)} at "
                     f"{figure(caps[limiting].value or 0)} {s.unit}, but compute was not "
                     "measured, so no bottleneck is named")
        limiting = None
    for c in caps.values():
        if c.status == "measured":
            said.append((c.resource, capacity_line(c.resource, f"{figure(c.value or 0)} "
                                                               f"{s.unit} — {c.how}.")))
    if pipe is not None:
        said.append(("pipeline", f"The real pipeline ({pipe['key'].get('loader')}, "
                                 f"{pipe['key'].get('workers')} workers, "
                                 f"{pipe['key'].get('image_size')} px) trained "
                                 f"{figure(pipe['total_ips'])} {s.unit} against "
                                 f"{figure(pipe['compute_ips'])} on synthetic data in the same "
                                 f"process: {_au_note(run, pipe, rates=False)}."))
    said += [("decision", _sentence(n)) for n in notes]
    unknown = [f"{c.resource}: {c.missing}" for c in caps.values() if c.status == "unknown"]
    known = [c.value for c in caps.values() if c.value is not None]
    au = (min(1.0, min(known) / comp.value) if comp.value and known else None)
    if limiting is not None and unknown:
        said.append(("caveat", f"Among the measured resources only: {len(unknown)} "
                               "capacity(ies) unknown, which could be lower."))
    evidence = _by_relevance(said, limiting, comp.resource)
    return WorkloadVerdict(
        analysis_version=ANALYSIS_VERSION, workload=workload, unit=s.unit,
        sample="image" if workload == "resnet50" else "token",
        precision=s.precision, limiting_resource=limiting, capacity_details=dict(caps),
        predicted_accelerator_utilisation=au,
        # Under one round of the workers the pipeline timed no rate (_decide): the evidence
        # gives its figure and why, and no AU is called measured.
        measured_accelerator_utilisation=rated["au"] if rated else None,
        measured_accelerator_utilisation_note=_au_note(run, rated) if rated else None,
        evidence=evidence,
        advice=advice(run, limiting, caps, s, comp.value) if limiting else [
            "Nothing measured names a bottleneck: run the probes listed as unknown (with a "
            "larger --time-budget where they ran out of time)."],
        unknown=unknown, constraints=_constraints(run, s), first_epoch=first_epoch,
        dataset=JudgedDataset(ts.samples, ts.bytes, fits, ts.name, ts.basis),
    )


def verdict(run: RunResult, workload: str | None = None) -> Verdict:
    """The verdict for the primary workload (ResNet50 unless --workload or analysis.workload
    says otherwise), with every workload's beside it."""
    acfg = analysis_config(run, workload)
    per = {w: workload_verdict(run, w, acfg) for w in WORKLOADS}
    health = reference_check.health(run)  # the doctor's evidence is added by its report
    return Verdict(per[acfg.workload], per, health.line, list(health.causes))
