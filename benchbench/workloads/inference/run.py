"""Workload `inference`: batch serving, driven by MLPerf's LoadGen where it is installed, in
PyTorch eager.

1. Offline (ResNet50): a batch-size sweep per precision, largest first, the weights cast to
   it, channels_last on a GPU, under torch.inference_mode; samples/s per size and the best.
   Then one LoadGen Offline run at the best batch (scenarios.py).
2. Server (ResNet50): the highest target rate LoadGen's Server scenario calls VALID at the p99
   bound (scenarios.py, search.py), served by benchbench's SUT: dynamic batching on a serving
   thread (loadgen_sut.py). Without LoadGen, the simulated server (fallback.py), labelled so.
3. Generation (GPT with a KV cache, generation.py): vLLM's serving benchmark's metrics.

The parts share the budget in turn, by PART_WEIGHTS. The models are behind models.Models and
LoadGen behind search.Harness, so the simulator plans with this code; a part that cannot run
here says "skipped, because …".
"""

from __future__ import annotations

import dataclasses

from benchbench.core.results import Measurement
from benchbench.core.sampling import Budget
from benchbench.probes._devices import budget_allows, failure, is_oom, usable_on
from benchbench.probes.api import (
    ProbeContext,
    ProbeOutput,
    ProbeSkipped,
    peak_of,
    resolved,
    throughput,
)
from benchbench.probes.meter import free_memory
from benchbench.workloads.inference import fallback, scenarios
from benchbench.workloads.inference.config import InferenceConfig, loadgen_installed
from benchbench.workloads.inference.generation import generation
from benchbench.workloads.inference.models import Models, TorchModels
from benchbench.workloads.inference.scenarios import LIBRARY_SAMPLES, OpenHarness, buckets
from benchbench.workloads.inference.search import Harness

ENGINE = "PyTorch eager, torch.inference_mode"
# Each part's share of the budget: a LoadGen Server run needs 459 queries or more to be VALID
# (search.EARLY_STOPPING_QUERIES), and the search wants several.
PART_WEIGHTS = {"offline": 1.0, "server": 2.0, "generation": 1.0}
# A CPU serves tens of requests/s within its bound, so one VALID Server run alone takes 6-12 s
# (459 queries, measured on a 2-core VM): there the server part takes more still.
CPU_SERVER_WEIGHT = 3.0
# With LoadGen the batch sweep takes this share of the offline part; its Offline run the rest.
SWEEP_SHARE = 0.75


def offline(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str,
            precisions: list[str], notes: list[str], lg: Harness | None) -> list[Measurement]:
    """The batch sweep per precision, then LoadGen's Offline at the first precision's best
    batch, where LoadGen drives the scenarios (`lg`)."""
    batches = sorted(set(resolved(cfg.batch_sizes, "batch_sizes")))
    size = resolved(cfg.image_size, "image_size")
    sweep = dataclasses.replace(ctx, budget=Budget(ctx.budget.remaining() * SWEEP_SHARE,
                                                   clock=ctx.clock)) if lg else ctx
    out: list[Measurement] = []
    first: Measurement | None = None  # the serving precision's best
    for i, precision in enumerate(precisions):
        per = _sweep(sweep, cfg, models, dev, precision, batches,
                     (len(precisions) - i) * len(batches), notes)
        if per:
            best = peak_of("peak_offline_throughput", {"precision": precision,
                                                       "image_size": size}, per,
                           "batch_size", "samples/s")
            best.context.update(engine=ENGINE, device=dev)
            out += [*per, best]
            first = best if i == 0 else first
    if lg and first:
        key = {"precision": precisions[0], "image_size": size}
        try:
            out.append(scenarios.offline(ctx, lg, key, first.value,
                                         int(first.context["best_batch_size"]), dev, ENGINE))
        except RuntimeError as exc:  # the sweep's figures stay
            notes.append(f"LoadGen Offline skipped, because {failure(exc)}")
            free_memory()
    return out


def _sweep(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str, precision: str,
           batches: list[int], left: int, notes: list[str]) -> list[Measurement]:
    """One precision's batch sizes, largest first, each priced by the last before it runs.
    Largest first: the plateau, where the peak is, lies at the large batches, and a budget
    that runs short drops the small ones, whose time is the host's launch path. A batch that
    does not fit in memory is skipped, and the smaller ones still run."""
    key = {"precision": precision, "image_size": resolved(cfg.image_size, "image_size"),
           "channels_last": bool(cfg.channels_last)}
    per: list[Measurement] = []
    last: tuple[int, float] | None = None  # (batch, seconds a call) of the last size
    for b in sorted(batches, reverse=True):
        if last and not budget_allows(ctx, last[1] * b / last[0], left):
            rest = sorted(x for x in batches if x <= b)
            which = f"batch {b}" if len(rest) == 1 else f"batches {rest[0]}-{b}"
            notes.append(f"offline {precision} {which} skipped, because the time budget ran "
                         "short")
            break
        try:
            timed = ctx.time_op(models.classify(precision, b), dev, left,
                                cfg.min_sample_s or 0.0)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"offline {precision} batch {b} skipped, because batch {b} does not "
                         "fit in memory")
            free_memory()
            left -= 1
            continue
        left -= 1
        per.append(throughput("offline_throughput", {**key, "batch_size": b}, timed, float(b),
                              "samples/s", {"engine": ENGINE, "device": dev}))
        last = (b, sorted(timed.per_call_s)[len(timed.per_call_s) // 2])
    return sorted(per, key=lambda m: int(m.key["batch_size"]))


def measure(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str,
            precisions: list[str], notes: list[str], open_harness: OpenHarness | None = None,
            simulated: str = "LoadGen not installed") -> list[Measurement]:
    """Every part in turn, each with its weighted share of what is left (the simulator runs
    this with its own models and harness). Without `open_harness` the server part is the
    simulated server, labelled with `simulated`'s reason."""
    parts = list(resolved(cfg.parts, "parts"))
    out: list[Measurement] = []
    # "fp32" means fp32: cuDNN runs convolutions in TF32 unless told otherwise, which on an
    # A100, H100, L4 or RTX 4090 would read 2-3x true fp32. Fixed shapes (the batch sizes,
    # the server's power-of-two buckets): cuDNN's autotuner picks the fastest kernels, as the
    # resnet50 probe lets it.
    ctx.meter.set_tf32(False)
    ctx.meter.set_cudnn_benchmark(dev, True)
    max_batch = resolved(cfg.max_batch, "max_batch")
    shapes = buckets(max_batch, *resolved(cfg.batch_sizes, "batch_sizes"))
    harness = open_harness(precisions[0], shapes) if open_harness and \
        {"offline", "server"} & set(parts) else None
    key = {"precision": precisions[0], "image_size": resolved(cfg.image_size, "image_size")}
    weights = {**PART_WEIGHTS, "server": CPU_SERVER_WEIGHT} if dev == "cpu" else PART_WEIGHTS
    try:
        for i, part in enumerate(parts):
            ctx.progress(part, i, len(parts))
            left = sum(weights[p] for p in parts[i:])
            sub = dataclasses.replace(ctx, budget=Budget(
                ctx.budget.remaining() * weights[part] / left, clock=ctx.clock))
            if part == "offline":
                out += offline(sub, cfg, models, dev, precisions, notes, harness)
            elif part == "server" and harness is not None:
                try:
                    out += scenarios.serve(sub, harness, {**key, "max_batch": max_batch},
                                           cfg.latency_bound_s, dev, ENGINE, notes)
                except RuntimeError as exc:  # what the other parts measured stays
                    notes.append(f"server skipped, because {failure(exc)}")
                    free_memory()
            elif part == "server":
                out += fallback.serve(sub, cfg, models, dev, precisions[0], out, notes,
                                      simulated, ENGINE)
            else:
                out += generation(sub, cfg, models, dev, precisions[0], notes)
    finally:
        if harness is not None:
            harness.close()
    models.release()
    ctx.progress("done", len(parts), len(parts))
    return out


def run(ctx: ProbeContext, cfg: InferenceConfig) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    notes: list[str] = []
    precisions = usable_on(dev, resolved(cfg.precisions, "precisions"), ("fp32",),
                           ("bf16",), "the CPU path serves in fp32 (bf16 is emulated on most "
                                      "CPUs)", notes, ctx.facts)
    if not precisions:
        raise ProbeSkipped("; ".join(notes))
    models = TorchModels(dev, resolved(cfg.image_size, "image_size"), bool(cfg.channels_last),
                         resolved(cfg.preset, "preset"))
    installed = loadgen_installed()
    if cfg.loadgen and not installed:
        notes.append("LoadGen skipped, because mlperf_loadgen is not installed (pip install "
                     "'benchbench[inference]'): the simulated server ran instead")

    def open_harness(precision: str, shapes: list[int]) -> Harness:
        from benchbench.workloads.inference.loadgen_sut import LoadGenHarness

        serve = models.library(precision, LIBRARY_SAMPLES, shapes)
        return LoadGenHarness(serve, LIBRARY_SAMPLES, ctx.inputs.run_dir, ctx.clock)

    use = bool(cfg.loadgen) and installed
    out = measure(ctx, cfg, models, dev, precisions, notes, open_harness if use else None,
                  "LoadGen not installed" if not installed else "inference.loadgen=false")
    if dev != "cpu":
        name = ctx.meter.device_name(dev)
        for m in out:
            m.context["gpu_name"] = name
    logs = list(dict.fromkeys(f for m in out for f in m.context.get("logs") or []))
    return ProbeOutput(out, notes=notes, params={"precisions": precisions, "loadgen": use},
                       artifacts=logs)
