"""The buyer's guide's three LLM-era claims, held against what a run measured:

- "LLM fine-tuning needs at least an A100 80GB" (memory_fit: the largest full fine-tune here,
  and what the measured bytes derive for 80 GB, ZeRO-3 and LoRA);
- "H100's Transformer Engine cuts large-model training time by over 40%" (transformer fp8
  against amp_bf16, end to end, judged only from a compiled pair at a width where fp8 can pay;
  matmul fp8 against bf16, the kernels);
- "batch inference is fine on 1-2 T4, L4 or RTX 4090" (inference: the highest rate served
  within the p99 bound, a lower bound where the search ran out of time before a rate missed
  the bound; the offline rate beside MLPerf's published Offline figures). A rate is held
  against MLPerf only at its conditions: 224 px, INT8, TensorRT, and the scenario of the
  figure (the table holds Offline figures only, so the server rate is never counted in T4s);
  where one differs the comparison is refused, both sides named.

Pure functions over a RunResult; a claim the run cannot answer says why. Units: parameters,
B, samples/s, s, ratio.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchbench.analysis import inference
from benchbench.analysis.capacities import metric, ok_probe, why_missing
from benchbench.analysis.memory_fit import (
    CARD_80GB_USABLE_B,
    LADDER,
    at_least,
    billions,
    derived_lines,
    edge_text,
    needs,
)
from benchbench.core.gpus import gpu_count
from benchbench.core.names import opened
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.units import iec

# MLPerf Inference, datacenter, closed division, ResNet-50 v1.5 Offline, samples/s per
# accelerator (TensorRT, INT8), as benchbench's issue 23 gives them. They were not re-read from
# mlcommons.org here (no copy of the results tables was reachable), so they are context for a
# ratio, never a pass mark; docs/references.md says the same.
MLPERF_OFFLINE = {"H100": 88_526.0, "A100": 42_379.0, "L4": 12_882.0, "T4": 6_036.0}
MLPERF_ENGINE = "TensorRT, INT8 (MLPerf Inference, datacenter, closed, ResNet-50 v1.5 Offline)"
# The conditions of those figures: MLPerf's ResNet-50 v1.5 classifies ImageNet at 224x224 (its
# reference preprocessing), the submissions ran TensorRT engines in INT8, and the Offline
# scenario leaves the batch to the submitter. A rate at another image size, precision or
# engine is not held against them at all: a 64 px image is ~1/12 of a 224 px one's FLOPs, and
# eager bf16 against TensorRT INT8 measures the software stack as much as the GPU (an H200 in
# eager bf16 read 0.9 T4s).
MLPERF_IMAGE_SIZE = 224
MLPERF_PRECISION = "INT8"
MLPERF_RUNTIME = "TensorRT"
MLPERF_CONDITIONS = (f"{MLPERF_IMAGE_SIZE} px, {MLPERF_PRECISION}, {MLPERF_RUNTIME}, batches of "
                     "the submitter's choice")
# MLPerf Inference's Server bound for ResNet-50: 15 ms at the 99th percentile (its rules,
# "Latency constraint"); the inference probe's default bound on a GPU.
MLPERF_SERVER_BOUND_S = 0.015
# Published fp8 gains (torchao's float8 training and Transformer Engine reports): 1.1-1.25x
# end to end on large-model training, up to 1.8x for the matmuls alone (mamf-finder: 1.77x
# on H100, references.toml).
FP8_END_TO_END = (1.10, 1.25)
FP8_KERNEL = 1.8
GUIDE_FP8_SAVING = 0.40
# Where an fp8 training step can be faster than bf16 at all, so where a measurement can speak
# to the claim: torchao's float8 under torch.compile (which fuses its amax, scale and cast
# kernels; torchtitan's float8 docs make compile required) on a model of width 2048 or more.
# Eager, or narrower, fp8 is expected to be slower than bf16 (pytorch/ao#685; pytorch/ao#572),
# whatever the hardware: such a pair measures torchao's overhead, not Transformer Engine.
FP8_PAYS_WIDTH = 2048


@dataclass(frozen=True)
class Claim:
    claim: str  # the guide's words
    measured: str | None  # what this run measured, in words; None: it could not
    check: str  # the claim against it, or why it could not be checked
    derived: list[str]  # what the measurements derive beyond themselves, each said so


def fine_tuning(run: RunResult) -> Claim:
    claim = "LLM fine-tuning needs at least an A100 80GB"
    pr = ok_probe(run, "memory_fit")
    largest = {m.key["mode"]: m for m in metric(pr, "largest_model")}
    if not largest:
        return Claim(claim, None, f"not checked, because {why_missing(run, 'memory_fit')}"
                     if pr is None else "not checked, because no size fitted", [])
    any_m = next(iter(largest.values()))
    seq, precision = any_m.key["seq_len"], any_m.key["precision"]
    parts = []
    for mode, label in (("plain", ""), ("checkpointing", "with activation checkpointing ")):
        m = largest.get(mode)
        if m is not None:
            bound = m.context.get("bounded_by")
            lower = "" if bound in ("memory", "the ladder's end") else \
                f", a lower bound (larger sizes were not tried: {bound})"
            edge = edge_text(m) if bound == "memory" else ""
            floor = "at least " if bound == "memory" and at_least(m) else ""
            parts.append(f"{label}{floor}{billions(int(m.value))} parameters ({m.context['rung']}, "
                         f"peak {iec(m.context.get('peak_B') or 0)} allocated"
                         + (f"; {edge}" if edge else "") + f"){lower}")
    measured = (f"largest full fine-tune here: {'; '.join(parts)} at seq {seq}, micro-batch 1, "
                f"{precision}, AdamW (measured)")
    ratio = ratio_of(metric(pr, "step_peak_memory"))
    device = str(any_m.context.get("device") or "cpu")
    memory = any_m.context.get("memory_total_B")
    if not device.startswith("cuda") or ratio is None or not memory:
        return Claim(claim, measured, "not checked against the claim, because on a CPU the "
                     "sizes tried are bound by time, not by memory (each point's measured ÷ "
                     "estimated memory is in the Memory fit table)", [])
    derived = derived_lines(seq, precision, ratio, float(memory), gpu_count(run.environment))
    seven = needs(LADDER["7b"], seq, precision, True, ratio)
    card = f"an H100 80GB's {iec(CARD_80GB_USABLE_B)} usable"
    verdict = (f"holds: a 7B model's full fine-tune needs more than {card} even with "
               f"activation checkpointing ({iec(seven)} at these bytes)"
               if seven > CARD_80GB_USABLE_B else
               f"does not hold for a 7B model: with checkpointing it needs {iec(seven)}, "
               f"within {card}")
    return Claim(claim, measured, verdict, derived)


def ratio_of(points: list[Measurement]) -> float | None:
    """The median measured ÷ estimated memory over the measured points."""
    ratios = [m.context["ratio"] for m in points if m.context.get("ratio")]
    return statistics.median(ratios) if ratios else None


def _throughput(run: RunResult, probe: str, precision: str) -> Measurement | None:
    return next((m for m in metric(ok_probe(run, probe), "throughput")
                 if m.key.get("precision") == precision), None)


def transformer_engine(run: RunResult) -> Claim:
    claim = "H100's Transformer Engine cuts large-model training time by over 40%"
    fp8, bf16 = _throughput(run, "transformer", "fp8"), _throughput(run, "transformer",
                                                                     "amp_bf16")
    mm = {m.key.get("dtype"): m for m in metric(ok_probe(run, "matmul"), "peak_flops")
          if str(m.key.get("device")) in ("cuda:0", "cpu")}
    kernels = (f"the matmul alone: fp8 {mm['fp8'].value / mm['bf16'].value:.2f}x bf16 "
               f"(kernels reach up to {FP8_KERNEL:g}x)") if "fp8" in mm and "bf16" in mm \
        else None
    if fp8 is None or bf16 is None:
        pr = run.probe("transformer")
        why = next((n for n in (pr.reason or "").split("; ") if n.startswith("fp8")), None) \
            if pr else None
        return Claim(claim, kernels, "not checked, because " + (
            why.split("because ", 1)[-1] if why else "the transformer probe measured no fp8 "
            "and amp_bf16 pair"), [])
    saving = 1 - bf16.value / fp8.value
    width, compiled = fp8.context.get("d_model"), bool(fp8.context.get("compile")) and \
        bool(bf16.context.get("compile"))
    conditions = ", ".join([str(fp8.key.get("preset")),
                            *([f"d_model {width}"] if width else []),
                            "compiled" if compiled else "eager"])
    effect = f"saves {saving:.0%} of the step time" if saving >= 0 else \
        f"takes {-saving:.0%} more step time"
    measured = (f"fp8 (torchao float8 training) {effect} against amp_bf16 ({fp8.value:,.0f} "
                f"vs {bf16.value:,.0f} tokens/s, end to end, {conditions})"
                + (f"; {kernels}" if kernels else ""))
    lo, hi = FP8_END_TO_END
    published = (f"published end-to-end gains are {lo:g}-{hi:g}x ({1 - 1 / lo:.0%}-"
                 f"{1 - 1 / hi:.0%} saved), compiled, at large widths; kernels up to "
                 f"{FP8_KERNEL:g}x")
    why_not = fp8_cannot_pay(width, compiled)
    if why_not:
        return Claim(claim, measured, f"cannot judge the claim, because {why_not}: fp8 is "
                     "expected to be slower than bf16 there (pytorch/ao#685), so this pair "
                     "measures torchao's overhead, not what Transformer Engine saves; "
                     f"{published}", [])
    check = (f"{'holds' if saving > GUIDE_FP8_SAVING else 'does not hold'} here: "
             f"{saving:.0%} against the guide's 40%; {published}; this is the end-to-end "
             "figure")
    return Claim(claim, measured, check, [])


def fp8_cannot_pay(width: object, compiled: bool) -> str | None:
    """Why a transformer fp8/amp_bf16 pair cannot speak to the claim (eager, too narrow, or
    of unknown width); None when it was compiled at a width of FP8_PAYS_WIDTH or more."""
    why = []
    if not compiled:
        why.append("it was measured eager (torch.compile off: set transformer.compile=true)")
    if not isinstance(width, int) or isinstance(width, bool):
        why.append("the run did not record the model's width")
    elif width < FP8_PAYS_WIDTH:
        why.append(f"the model's width, d_model {width}, is under the {FP8_PAYS_WIDTH} where "
                   "fp8's faster GEMMs outweigh its scaling (transformer.preset=1.3b is "
                   f"{FP8_PAYS_WIDTH} wide)")
    return " and ".join(why) or None


def server_rate(pr: ProbeResult | None) -> Measurement | None:
    """The inference probe's highest rate served within its p99 bound, or None."""
    return next(iter(metric(pr, "server_throughput")), None)


def rate_is_lower_bound(served: Measurement) -> bool:
    """Whether a server rate is only a floor: its search stopped for the time budget before
    any rate it tried missed the bound, so the machine may serve more. A search that found a
    rate over the bound, or climbed to the offline ceiling ("ceiling": no server sustains
    more), measured the capacity itself. The probe says so itself ("lower_bound": LoadGen's
    search counts a rate as missed once it failed twice); a run from before it did is judged
    from its stopped_by and the rates it tried."""
    said = served.context.get("lower_bound")
    if isinstance(said, bool):
        return said
    bound = served.key.get("latency_bound_s")
    if served.context.get("stopped_by") != "budget" or not isinstance(bound, (int, float)):
        return False
    return all(t.get("p99_s", 0.0) <= bound for t in served.context.get("tried") or [])


LOWER_BOUND = ("a lower bound: the search's time budget ran out before any rate it tried "
               "missed the bound, so the machine may serve more")


def short_run(context: dict[str, Any]) -> str:
    """Why a Server run whose budget paid for fewer queries than LoadGen's early stopping
    needs is not judged (LoadGen cannot call it VALID, whatever the machine serves), with
    the count the run recorded as needed."""
    needed = context.get("queries_for_valid")
    return ("the time budget paid for one LoadGen Server run shorter than a VALID verdict "
            "needs" + (f" ({needed} queries)" if needed else "")
            + ": a longer run (more --time-budget) measures it")


def offline_peak(pr: ProbeResult | None) -> Measurement | None:
    """The inference probe's best offline rate over its precisions, or None."""
    return max(metric(pr, "peak_offline_throughput"), key=lambda m: m.value, default=None)


def in_t4s(images_per_s: float) -> float:
    """A ResNet50 rate in T4s, at MLPerf's T4 offline figure."""
    return images_per_s / MLPERF_OFFLINE["T4"]


def mlperf_mismatch(m: Measurement, whose: str = "MLPerf's figures are") -> str | None:
    """Why an inference rate is not held against MLPerf's figures, each condition that differs
    with both sides ('measured at 64 px, MLPerf's T4 figure is at 224 px; bf16 here, INT8
    there; PyTorch eager here, TensorRT there'), or None when all are theirs."""
    size = m.key.get("image_size")
    why = []
    if size != MLPERF_IMAGE_SIZE:
        here = "the run did not record its image size" if size is None else \
            f"measured at {size} px"
        why.append(f"{here}, {whose} at {MLPERF_IMAGE_SIZE} px")
    precision = str(m.key.get("precision") or "precision not recorded")
    if precision.upper() != MLPERF_PRECISION:
        why.append(f"{precision} here, {MLPERF_PRECISION} there")
    engine = engine_of(m)
    if MLPERF_RUNTIME.lower() not in engine.lower():
        why.append(f"{engine} here, {MLPERF_RUNTIME} there")
    return "; ".join(why) or None


def engine_of(m: Measurement) -> str:
    """An inference rate's engine, its first words ('PyTorch eager'), as the run recorded it."""
    return str(m.context.get("engine") or "PyTorch eager").split(",")[0]


def conditions(m: Measurement) -> str:
    """An inference rate's conditions: '224 px, amp_bf16, PyTorch eager, best batch 64', and
    for a server rate how it was driven ('LoadGen Server, 2 s runs …' or 'simulated server,
    LoadGen not installed': these conditions are said in parentheses of their own)."""
    size, best = m.key.get("image_size"), m.context.get("best_batch_size")
    batch = (f"best batch {best}" if best is not None else
             f"dynamic batches up to {m.key['max_batch']}" if "max_batch" in m.key else None)
    driver = m.context.get("label")
    if isinstance(driver, str):
        driver = opened(driver)
    return ", ".join([f"{size} px" if size is not None else "image size not recorded",
                      str(m.key.get("precision")), engine_of(m), *([batch] if batch else []),
                      *([driver] if driver else [])])


def bound_text(m: Measurement) -> str:
    """A server rate's p99 bound, and whose it is: '15 ms p99' or '100 ms p99 (not
    MLPerf's: …)'."""
    bound, source = m.key["latency_bound_s"], m.context.get("bound_source")
    own = bound == MLPERF_SERVER_BOUND_S and not str(source or "").startswith("set by")
    return f"{bound * 1e3:g} ms p99" + ("" if own or not source else f" ({source})")


def t4_line(offline: Measurement | None) -> str:
    """The offline rate in T4s at MLPerf's T4 Offline figure: like with like (the same
    scenario, image size, precision and engine); or why it is not counted."""
    if offline is None:
        return "not compared with MLPerf's T4: the run has no offline rate"
    unlike = mlperf_mismatch(offline, "MLPerf's T4 figure is")
    if unlike:
        return (f"not compared with MLPerf's T4 ({MLPERF_OFFLINE['T4']:,.0f} images/s offline "
                f"at {MLPERF_CONDITIONS}): {unlike}; a ratio would measure the software as "
                "much as the GPU")
    return (f"offline, {in_t4s(offline.value):,.1f} T4s at MLPerf's T4 offline figure "
            f"({MLPERF_OFFLINE['T4']:,.0f} images/s at {MLPERF_CONDITIONS}); the server rate "
            "is not counted in T4s (no MLPerf Server figure is held here)")


def serving(run: RunResult) -> Claim:
    claim = "batch inference is fine on 1-2 T4, L4 or RTX 4090"
    pr = ok_probe(run, "inference")
    if pr is None:
        return Claim(claim, None, f"not checked, because {why_missing(run, 'inference')}", [])
    served = server_rate(pr)
    offline = offline_peak(pr)
    latency = next(iter(metric(pr, "server_latency")), None)
    derived = [offline_line(offline, pr)] if offline else []
    if served is None:
        p99 = latency.context.get("p99_s") if latency else None
        measured = f"no rate met {bound_text(latency)}" + (
            f" (p99 {p99 * 1e3:,.3g} ms at the lowest rate tried)" if p99 else "") \
            if latency else None
        if latency and latency.context.get("short_run"):
            return Claim(claim, measured, f"not judged: {short_run(latency.context)}",
                         derived)
        return Claim(claim, measured, "not met here: ResNet50 is not served within the bound",
                     derived)
    floor = rate_is_lower_bound(served)
    measured = (f"this machine serves ResNet50 at {'a rate of at least ' if floor else ''}"
                f"{served.value:,.0f} images/s within {bound_text(served)} (p99 "
                f"{served.context['p99_s'] * 1e3:,.3g} ms, {conditions(served)})"
                + (f"; {LOWER_BOUND}" if floor else ""))
    # Like with like: the T4 count is the offline rate's, against MLPerf's Offline figure.
    return Claim(claim, measured, t4_line(offline), derived)


def offline_line(offline: Measurement, pr: ProbeResult | None = None) -> str:
    """The best offline rate, a floor where the sweep did not reach the peak, beside MLPerf's
    published offline figures with both sides' conditions, or why it is not held against
    them."""
    here = f"offline ({conditions(offline)}): {inference.peak_text(pr, offline)}"
    unlike = mlperf_mismatch(offline)
    if unlike:
        return (f"{here}; not compared with MLPerf's published offline figures "
                f"({MLPERF_CONDITIONS}): {unlike}; a ratio would measure the software as "
                "much as the GPU")
    ratios = [f"{offline.value / v:.3g}x {gpu}" for gpu, v in MLPERF_OFFLINE.items()]
    return (f"{here}; {', '.join(ratios)} of MLPerf's published offline figures "
            f"({MLPERF_CONDITIONS}; {MLPERF_ENGINE}): a ratio, not a pass mark")


def claims(run: RunResult) -> list[Claim]:
    return [fine_tuning(run), transformer_engine(run), serving(run)]

