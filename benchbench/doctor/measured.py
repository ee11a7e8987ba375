"""The guide's scenarios answered by the run's own measurements where it made them: how large a
model fully fine-tunes here (memory_fit), and what rate ResNet50 is served at within MLPerf's
bound (inference), instead of what the GPU's name suggests. Pure, read-only."""

from __future__ import annotations

from benchbench.analysis import guide
from benchbench.analysis.capacities import metric, ok_probe
from benchbench.analysis.memory_fit import LADDER, billions, edge_text, zero3_largest
from benchbench.core.gpus import gpu_count
from benchbench.core.results import RunResult
from benchbench.doctor.rules import Check

MEASURED = "measured: this run's memory_fit and inference workloads"
TARGET = "7b"  # the guide's fine-tuning row, Llama-class: a 7B model


def fine_tuning(key: str, run: RunResult | None) -> Check | None:
    """Does a 7B model fully fine-tune here: on one GPU with activation checkpointing
    (measured), or with ZeRO-3 over this machine's GPUs (derived from the measured bytes)?
    None when the run has no GPU memory_fit to answer it (the GPU-memory rule stands)."""
    name = f"{key}: full fine-tune of a 7B model (measured)"
    threshold = (f"a {billions(LADDER[TARGET].params())}-parameter model trains on one GPU, or "
                 "with ZeRO-3 over this machine's GPUs")
    pr = ok_probe(run, "memory_fit") if run else None
    ms = {m.key["mode"]: m for m in metric(pr, "largest_model")}
    if not ms or not str(next(iter(ms.values())).context.get("device", "")).startswith("cuda"):
        return None
    best = max(ms.values(), key=lambda m: m.value)
    seq, precision = best.key["seq_len"], best.key["precision"]
    edge = edge_text(best) if best.context.get("bounded_by") == "memory" else ""
    measured = (f"largest on one GPU: {billions(int(best.value))} ({best.key['mode']}, seq "
                f"{seq}{'; ' + edge if edge else ''})")
    if best.value >= LADDER[TARGET].params():
        return Check(name, "pass", measured, threshold, MEASURED)
    ratio = guide.ratio_of(metric(pr, "step_peak_memory"))
    memory, n = best.context.get("memory_total_B"), gpu_count(run.environment) if run else 1
    if ratio is None or not memory or n < 2:
        return Check(name, "warn", measured, threshold, MEASURED,
                     "more GPU memory per GPU, or several GPUs with ZeRO-3 (or LoRA)")
    fits = zero3_largest(seq, precision, ratio, memory, n)
    ok = fits is not None and LADDER[fits].params() >= LADDER[TARGET].params()
    derived = (f"; with ZeRO-3 over its {n} GPUs up to {fits or 'none'} (derived from the "
               "measured bytes, not measured)")
    return Check(name, "pass" if ok else "warn", measured + derived, threshold, MEASURED,
                 None if ok else "more GPU memory per GPU, or more GPUs with ZeRO-3 (or LoRA)")


def serving(key: str, run: RunResult | None) -> Check | None:
    """Is ResNet50 served within the p99 bound here (MLPerf's 15 ms on a GPU that meets it),
    and at how many T4s' offline rate? None when the run has no inference measurement, or
    one too short for LoadGen's verdict (the compute rule stands)."""
    pr = ok_probe(run, "inference") if run else None
    latency = next(iter(metric(pr, "server_latency")), None)
    if latency is None or latency.context.get("short_run"):
        return None  # nothing measured, or too short a run for LoadGen's verdict
    bound = latency.key["latency_bound_s"]
    whose = "MLPerf's p99 bound" if bound == guide.MLPERF_SERVER_BOUND_S else \
        f"a {bound * 1e3:g} ms p99 bound"
    name = f"{key}: ResNet50 served within {whose} (measured)"
    threshold = f"some request rate kept within {bound * 1e3:g} ms at the 99th percentile"
    served = guide.server_rate(pr)
    if served is None:
        return Check(name, "warn", f"no rate met it (p99 {latency.context['p99_s'] * 1e3:,.3g} "
                     "ms at the lowest tried)", threshold, MEASURED,
                     "a faster accelerator, or a serving engine (TensorRT, torch.compile)")
    # A search that ran out of time before any rate missed the bound measured a floor, not
    # the machine's capacity: said so, and still a pass (that rate was served within it).
    at_least = "at least " if guide.rate_is_lower_bound(served) else ""
    # Like with like: the T4 count is the offline rate's, against MLPerf's Offline figure.
    return Check(name, "pass", f"{at_least}{served.value:,.0f} images/s within the bound "
                 f"({guide.conditions(served)}); {guide.t4_line(guide.offline_peak(pr))}"
                 + (f"; {guide.LOWER_BOUND}" if at_least else ""), threshold, MEASURED)
