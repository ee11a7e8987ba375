"""The verdict: which resource limits training on this machine, the evidence, and the fix.

Pure functions over a RunResult (no torch). Every capacity is in the workload's samples/s for
the whole machine (capacities.py); the lowest one limits training. The real input pipeline,
measured end to end by `pipeline`, arbitrates between compute and the input side, because on
a CPU box the loader and the training step share the same cores. The verdict is about the
user's real training set (ImageNet-1k unless analysis.* says otherwise), not the sample the
probes read: a set larger than RAM is read from storage every epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchbench.analysis import cached_reads, limits, reference_check
from benchbench.analysis import capacities as cap
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
    LOADER_DISAGREES,
    PIPELINE_MIN_ROUNDS,
    accelerator_utilisation,
)
from benchbench.analysis.verdict_types import (
    Constraint,
    FirstEpoch,
    JudgedDataset,
    Verdict,
    WorkloadVerdict,
)
from benchbench.core.config import CPU_QUICK_PIPELINE_SIZE
from benchbench.core.gpus import run_gpus
from benchbench.core.names import resource_name
from benchbench.core.results import RunResult
from benchbench.core.stats import summarize
from benchbench.core.units import figure, iec

INPUT_SIDE = ("cpu_dataloading", "storage", "host_memory", "host_device_link")
# Two capacities this close are a close call whatever their samples say (rounds of one machine
# move by about this much from run to run); further apart, when within CLOSE_SIGMAS of their
# samples' combined spread.
CLOSE_FLOOR = 0.05
CLOSE_SIGMAS = 2.0


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
    total = next((m for m in cap.metric(pr, "total_throughput") if m.key == best["key"]), None)
    return {**best, "wait_share": share, "context": total.context if total else {}}


def _pipeline_line(run: RunResult, pipe: dict[str, Any], unit: str) -> str:
    """The evidence line of the real pipeline: what it trained, over what, and from which of
    its two rates (the steps' or the workers') the steady one came."""
    key, c = pipe["key"], pipe.get("context") or {}
    over = ""
    if c.get("timed_rounds") is not None:
        n, w = int(c["timed_rounds"]), int(pipe["round"])
        what = f"{n} timed rounds of its {w} workers" if w > 1 else f"{n} timed batches"
        later = n - int(c.get("judged_from_round") or 1) + 1
        over = f" over {what} (the later {later} judged)"
    line = (f"The real pipeline ({key.get('loader')}, {key.get('workers')} workers, "
            f"{key.get('image_size')} px) trained {figure(pipe['total_ips'])} {unit}{over} "
            f"against {figure(pipe['compute_ips'])} on synthetic data in the same process: "
            f"{_au_note(run, pipe, rates=False)}.")
    if run.config.get("quick") and str(run.config.get("device_resolved")) != "cuda" and \
            key.get("image_size") == CPU_QUICK_PIPELINE_SIZE:
        line += (f" A --quick run on a CPU trains it at {CPU_QUICK_PIPELINE_SIZE} px to fit its "
                 "minute: its rates are at that size, its AU a ratio at it; a default run "
                 "trains it at 224 px.")
    if c.get("steady_by") == "made":
        line += (f" Its workers made {figure(c['made_ips'])} {unit} over the timed rounds, "
                 f"below the {figure(c['taken_ips'])} the steps took: batches made before "
                 "the rounds were used up, so the workers' rate is the steady one.")
    return line


def _rounds(n: int, workers: int) -> str:
    """'one round of its 16 workers', '4 batches' (a loader that delivers one at a time)."""
    if workers <= 1:
        return "one batch" if n == 1 else f"{n} batches"
    return f"{'one round' if n == 1 else f'{n} rounds'} of its {workers} workers"


def _timed(pipe: dict[str, Any]) -> str:
    """What the real pipeline timed, in words: 'its one timed round', '3 timed steps …'."""
    if pipe.get("partial_round"):
        return (f"{pipe['steps']} timed steps, under one round of its {pipe['round']} "
                "workers,")
    n = pipe.get("rounds") or 0
    if pipe["round"] <= 1:
        return f"its {n} timed batch{'es' if n != 1 else ''}"
    return "its one timed round" if n == 1 else f"its {n} timed rounds"


@dataclass(frozen=True)
class Distrust:
    """Why the real pipeline does not decide: `text` for the evidence, `short` for a cell."""

    text: str
    short: str


def distrust(run: RunResult, pipe: dict[str, Any]) -> Distrust | None:
    """Why the real pipeline's figure does not decide the verdict, or None where it does:
    it read more than its loader delivers alone, or it timed too few rounds of the workers to
    show a steady state."""
    key = pipe["key"]
    alone = cap.loader_alone(run, key.get("loader"), key.get("workers"))
    over = pipe["total_ips"] / alone.value if alone is not None and alone.value > 0 else 0.0
    timed = _timed(pipe)
    if over > LOADER_DISAGREES and alone is not None:
        batch = alone.key.get("batch_size")
        at = f", batch {batch}" if batch and batch != key.get("batch_size") else ""
        rounds = len(alone.samples)  # a sample per round of its workers
        return Distrust(
            f"the real pipeline's {timed.removeprefix('its ')} read "
            f"{figure(pipe['total_ips'])} images/s, {over:.2f}× the {figure(alone.value)} its "
            f"{key.get('loader')} loader delivered alone ({key.get('workers')} workers{at}, "
            f"{rounds} rounds): a pipeline cannot train faster than its loader delivers, so "
            "those steps took batches the workers had ready, not the rate they make them at, "
            "and were not trusted; the verdict believes the loader alone, timed in steady state",
            f"read {over:.2f}× what its loader delivered alone: ready batches, not a rate")
    if pipe.get("partial_round"):
        # Seen on an H200: 3 timed steps of 16 workers read AU 0.93 in one run (a burst of
        # ready batches overruled the loader's 3,022 images/s) and 0.54 in the next.
        return Distrust(
            f"the real pipeline timed {pipe['steps']} steps, under one round of its "
            f"{pipe['round']} workers: a burst of batches they finished together or the wait "
            "for the next round, not the loader's rate, so it does not decide; the separate "
            "capacities do",
            f"{pipe['steps']} steps are under one round of the {pipe['round']} workers, a burst "
            "of ready batches or a wait for the next, not a rate")
    rounds = pipe.get("rounds") or 0
    if rounds < PIPELINE_MIN_ROUNDS:
        return Distrust(
            f"the real pipeline timed {_rounds(rounds, pipe['round'])}, under the "
            f"{PIPELINE_MIN_ROUNDS} that show a steady state (a full prefetch buffer feeds the "
            "first rounds at the step's speed), so it does not decide; the separate capacities "
            "do",
            f"{_rounds(rounds, pipe['round']).replace(' of its', ' of the')}, under the "
            f"{PIPELINE_MIN_ROUNDS} that show a steady state")
    return None


def _with_pipeline(caps: dict[str, cap.Capacity], pipe: dict[str, Any], compute: str
                   ) -> list[str]:
    """Fold a trusted real pipeline into the data-loading capacity, where it measured the
    loader as it feeds the real step: below its rate alone where the steps waited for data
    (on a CPU the loader and the step share the cores), above it where the pipeline fed more
    than the loader alone read. Returns what it decided, for the evidence."""
    loader = caps.get("cpu_dataloading")
    total, au = pipe["total_ips"], pipe["au"]
    # Input-bound only when the steps really waited for data: a low AU with no wait means
    # the loader's threads slowed the step itself (on a CPU box they share the cores).
    waited = pipe.get("wait_share") is None or pipe["wait_share"] >= 1 - AU_PASS
    key = pipe["key"]
    what = (f"the real pipeline's rate ({key.get('loader')}, {key.get('workers')} workers, "
            f"{pipe.get('rounds')} timed rounds)")
    if loader is None or loader.value is None:
        return []
    if au < AU_PASS and waited and total < loader.value:
        caps["cpu_dataloading"] = cap.Capacity(
            "cpu_dataloading", total, "measured",
            f"{what}: the loader as it feeds the training step, {_au_note_short(au)}; alone it "
            f"delivered {figure(loader.value)} images/s", source="pipeline total_throughput",
            spread=pipe.get("spread"))
        return [f"the real pipeline waited for data: its loader fed {figure(total)} images/s "
                f"with the step running, below the {figure(loader.value)} it delivered alone"
                + (" (both compete for the same cores)" if compute == "cpu_compute" else "")]
    if au < AU_PASS and not waited:
        return [f"the steps waited for data only {pipe['wait_share']:.1%} of the time: the AU "
                "shortfall is the loader's threads slowing the training step on shared cores, "
                "so it is the compute figure's, not the loader's"]
    if au >= AU_PASS and total > loader.value:
        caps["cpu_dataloading"] = cap.Capacity(
            "cpu_dataloading", total, "measured",
            f"{what}: it fed the training step at least this, {_au_note_short(au)}, more than "
            f"the {figure(loader.value)} images/s the loader read alone",
            source="pipeline total_throughput", spread=pipe.get("spread"))
        return ["the real pipeline kept the device busy at its configuration, feeding it more "
                "than the loader read on its own"]
    return []


def _au_note_short(au: float) -> str:
    return f"AU {min(au, 1.0):.0%}"


def _close_call(caps: dict[str, cap.Capacity], limiting: str, unit: str
                ) -> tuple[tuple[str, str] | None, str | None]:
    """The limit and the next capacity when they lie within their measured noise of each
    other (CLOSE_FLOOR, CLOSE_SIGMAS), with the sentence that says so."""
    rest = [c for r, c in caps.items() if r != limiting and c.value is not None]
    low = caps[limiting]
    nxt = min(rest, key=lambda c: c.value or 0.0, default=None)
    if nxt is None or not low.value or nxt.value is None:
        return None, None
    apart = nxt.value / low.value - 1
    noise = math.hypot(low.spread or 0.0, nxt.spread or 0.0)
    if apart > max(CLOSE_FLOOR, CLOSE_SIGMAS * noise):
        return None, None
    spreads = [f"±{c.spread:.0%} for {resource_name(c.resource)}" for c in (low, nxt)
               if c.spread is not None]
    within = (f"within {CLOSE_SIGMAS:g}× their samples' spread ({', '.join(spreads)})"
              if noise and apart > CLOSE_FLOOR else f"within {CLOSE_FLOOR:.0%}")
    pair = {low.resource, nxt.resource}
    separate = ("the real pipeline over more rounds (a larger --time-budget) separates them: "
                "it trains on the loader's batches"
                if pair & {"cpu_dataloading"} and pair & {"gpu_compute", "cpu_compute"}
                else "a longer run (a larger --time-budget) narrows both spreads")
    return ((low.resource, nxt.resource),
            f"a close call between {resource_name(low.resource)} ({figure(low.value)} {unit}) "
            f"and {resource_name(nxt.resource)} ({figure(nxt.value)} {unit}): {apart:.1%} "
            f"apart, {within}, so either may limit; {separate}")


def _decide(caps: dict[str, cap.Capacity], pipe: dict[str, Any] | None,
            why: Distrust | None, compute: str) -> tuple[str | None, list[str]]:
    """The limit: the lowest capacity once a trusted real pipeline has told the loader's
    figure (_with_pipeline); one it does not trust (`why`, from distrust) says why."""
    notes = []
    if pipe is not None:
        notes += [why.text] if why else _with_pipeline(caps, pipe, compute)
    known = {r: c.value for r, c in caps.items() if c.value is not None}
    if not known:
        return None, notes
    return min(known, key=lambda r: known[r]), notes


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
    store = cached_reads.labelled(run, cap.storage(run, s))
    fits, ram = cap._fits_in_ram(run, ts.bytes)
    first_epoch = None
    said: list[tuple[str, str]] = []  # (what a line is about: a resource or a _RANK key, it)
    # The set's name and size; where the figures came from is the dataset line's to say.
    described = f"{ts.name} ({ts.samples:,} images, {iec(ts.bytes)})"
    if workload == "resnet50" and fits:
        caps["host_memory"] = cap.host_memory(run, s)
        first_epoch = FirstEpoch(
            "storage", store.value, f"{described} fits in the {(ram or 0) / 2**30:.0f} GiB of "
            f"free RAM: storage ({store.how or store.missing}) limits only the first epoch, "
            "then the page cache carries it")
        said.append(("storage", _sentence(first_epoch.detail)))
    else:
        # Of a set larger than free RAM the page cache still keeps part: storage serves the
        # rest, and sustains training at its read rate ÷ that share.
        epoch = cached_reads.epoch_share(run, ts.bytes) if workload == "resnet50" else None
        caps["storage"] = cached_reads.for_epoch(store, epoch[0]) if epoch else store
        if epoch:
            rate = "" if store.value is None else (
                f": its {store.value:,.0f} images/s"
                + (f" ({cached_reads.HOST_CACHE})" if cached_reads.host_cache(run) else "")
                + f" sustain {store.value / epoch[0]:,.0f} images/s of training")
            said.append(("storage", _sentence(
                cached_reads.epoch_text(described, *epoch, ts.bytes) + rate)))
    pipe = _pipeline_check(run, s)
    if s.compute_scale != 1.0 and comp.value is not None:
        # Only a pipeline that ran at this size is cited: an interrupted run may not have
        # reached it at all.
        one_size = ("the real pipeline below compares the loader and the step at one size"
                    if pipe is not None else "no real pipeline ran to compare the loader and "
                    "the step at one size")
        said.append((comp.resource, f"The compute figure was measured at {s.compute_image} px "
                     f"and the loader at {s.image_size} px: compute is compared at "
                     f"{s.image_size} px, scaled by pixel count (×{s.compute_scale:.3g}); "
                     f"{one_size}."))
    caps["host_device_link"] = cap.host_device_link(run, s)
    caps["interconnect"] = cap.interconnect(run, s, comp)
    why = distrust(run, pipe) if pipe is not None else None
    limiting, notes = _decide(caps, pipe, why, comp.resource)
    rated = pipe if pipe is not None and why is None else None
    close: tuple[str, str] | None = None
    if comp.value is None and limiting is not None:
        # Without the compute capacity there is nothing to hold the others against: name
        # no bottleneck rather than the lowest of what happened to be measured.
        notes.append(f"the lowest measured capacity is {resource_name(limiting)} at "
                     f"{figure(caps[limiting].value or 0)} {s.unit}, but compute was not "
                     "measured, so no bottleneck is named")
        limiting = None
    elif limiting is not None:
        close, said_close = _close_call(caps, limiting, s.unit)
        if said_close:
            notes.append(said_close)
    for c in caps.values():
        if c.status == "measured":
            said.append((c.resource, capacity_line(c.resource, f"{figure(c.value or 0)} "
                                                               f"{s.unit} — {c.how}.")))
    if pipe is not None:
        said.append(("pipeline", _pipeline_line(run, pipe, s.unit)))
    said += [("decision", _sentence(n)) for n in notes]
    unknown = [f"{c.resource}: {c.missing}" for c in caps.values() if c.status == "unknown"]
    known = [c.value for c in caps.values() if c.value is not None]
    au = (min(1.0, min(known) / comp.value) if comp.value and known else None)
    if limiting is not None and unknown:
        said.append(("caveat", "Among the measured resources only: " + (
            "1 capacity is unknown, which could be lower." if len(unknown) == 1 else
            f"{len(unknown)} capacities are unknown, which could be lower.")))
    evidence = _by_relevance(said, limiting, comp.resource)
    return WorkloadVerdict(
        analysis_version=ANALYSIS_VERSION, workload=workload, unit=s.unit,
        sample="image" if workload == "resnet50" else "token",
        precision=s.precision, limiting_resource=limiting, capacity_details=dict(caps),
        predicted_accelerator_utilisation=au,
        # A pipeline that does not decide (distrust) timed no rate to trust: the evidence
        # gives its figure and why, and no AU is called measured.
        measured_accelerator_utilisation=rated["au"] if rated else None,
        measured_accelerator_utilisation_note=_au_note(run, rated) if rated else None,
        evidence=evidence,
        advice=advice(run, limiting, caps, s, comp.value) if limiting else [
            "Nothing measured names a bottleneck: run the probes listed as unknown (with a "
            "larger --time-budget where they ran out of time)."],
        unknown=unknown, constraints=_constraints(run, s), first_epoch=first_epoch,
        dataset=JudgedDataset(ts.samples, ts.bytes, fits, ts.name, ts.basis),
        close_call=close,
    )


def verdict(run: RunResult, workload: str | None = None) -> Verdict:
    """The verdict for the primary workload (ResNet50 unless --workload or analysis.workload
    says otherwise), with every workload's beside it. A figure beyond its physical limit is a
    timing error and decides nothing (analysis/limits.py)."""
    run = limits.screened(run)
    acfg = analysis_config(run, workload)
    per = {w: workload_verdict(run, w, acfg) for w in WORKLOADS}
    health = reference_check.health(run)  # the doctor's evidence is added by its report
    return Verdict(per[acfg.workload], per, health.line, list(health.causes))
