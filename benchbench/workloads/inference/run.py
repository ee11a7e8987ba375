"""Workload `inference`: batch serving as MLPerf Inference measures it, in PyTorch eager.

1. Offline (ResNet50): a batch-size sweep per precision, the weights cast to it, channels_last
   on a GPU, under torch.inference_mode; samples/s per size and the best.
2. Server (ResNet50): Poisson arrivals at rising rates, dynamic batching up to max_batch
   (server.py); the highest rate whose p99 latency stays within the bound (MLPerf's 15 ms),
   with p50, p90, p99 and max there, every latency kept. Batches are padded to a power of two,
   as a serving engine's batch buckets are, so that no unseen shape autotunes mid-run.
3. Generation (GPT with a KV cache, models/gpt_generate.py): at each decode batch, the
   prefill's tokens/s, the time to first token, the time per output token and decode tokens/s.

The parts share the budget in turn. The models are behind models.Models, so the simulator
plans with this code; a part that cannot run here says "skipped, because …".
"""

from __future__ import annotations

import dataclasses
from typing import Any

from benchbench.core.results import Measurement
from benchbench.core.sampling import Budget
from benchbench.probes._devices import budget_allows, is_oom, usable_on
from benchbench.probes.api import (
    ProbeContext,
    ProbeOutput,
    ProbeSkipped,
    median_of,
    peak_of,
    resolved,
    throughput,
    total_over_time,
)
from benchbench.probes.meter import free_memory
from benchbench.workloads.inference import server
from benchbench.workloads.inference.config import InferenceConfig
from benchbench.workloads.inference.models import Models, TorchModels

ENGINE = "PyTorch eager, torch.inference_mode"


def offline(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str,
            precisions: list[str], notes: list[str]) -> list[Measurement]:
    batches = sorted(set(resolved(cfg.batch_sizes, "batch_sizes")))
    size = resolved(cfg.image_size, "image_size")
    out: list[Measurement] = []
    for i, precision in enumerate(precisions):
        per = _sweep(ctx, cfg, models, dev, precision, batches,
                     (len(precisions) - i) * len(batches), notes)
        if per:
            best = peak_of("peak_offline_throughput", {"precision": precision,
                                                       "image_size": size}, per,
                           "batch_size", "samples/s")
            best.context.update(engine=ENGINE, device=dev)
            out += [*per, best]
    return out


def _sweep(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str, precision: str,
           batches: list[int], left: int, notes: list[str]) -> list[Measurement]:
    """One precision's batch sizes, smallest first, each priced by the last before it runs;
    the first that does not fit in memory ends the sweep."""
    key = {"precision": precision, "image_size": resolved(cfg.image_size, "image_size"),
           "channels_last": bool(cfg.channels_last)}
    per: list[Measurement] = []
    last: tuple[int, float] | None = None  # (batch, seconds a call) of the last size
    for b in batches:
        if last and not budget_allows(ctx, last[1] * b / last[0], left):
            notes.append(f"offline {precision} batch {b} and above skipped, because the time "
                         "budget ran short")
            break
        try:
            timed = ctx.time_op(models.classify(precision, b), dev, left,
                                cfg.min_sample_s or 0.0)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"offline {precision} batch {b} and above skipped, because batch {b} "
                         "does not fit in memory")
            free_memory()
            break
        left -= 1
        per.append(throughput("offline_throughput", {**key, "batch_size": b}, timed, float(b),
                              "samples/s", {"engine": ENGINE, "device": dev}))
        last = (b, sorted(timed.per_call_s)[len(timed.per_call_s) // 2])
    return per


def _call_s(offline_ms: list[Measurement], precision: str, batch: int) -> float | None:
    for m in offline_ms:
        if m.metric == "offline_throughput" and m.key["precision"] == precision and \
                m.key["batch_size"] == batch:
            return batch / m.value
    return None


def serve(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str, precision: str,
          offline_ms: list[Measurement], notes: list[str]) -> list[Measurement]:
    size = resolved(cfg.image_size, "image_size")
    max_batch, requests = resolved(cfg.max_batch, "max_batch"), resolved(cfg.requests, "requests")
    buckets = sorted({min(1 << i, max_batch) for i in range(max_batch.bit_length() + 1)})
    calls = {b: models.classify(precision, b) for b in buckets}
    for b in buckets:  # each shape once before any is timed: cuDNN picks its kernels
        for _ in range(max(1, ctx.policy.warmup_steps)):
            ctx.meter.timed_once(calls[b], dev)
    one = _call_s(offline_ms, precision, 1) or ctx.meter.timed_once(calls[1], dev)
    full = _call_s(offline_ms, precision, max_batch) or \
        ctx.meter.timed_once(calls[max_batch], dev)

    def service(k: int) -> float:
        return ctx.meter.timed_once(calls[next(b for b in buckets if b >= k)], dev)

    found = server.search(0.5 / one, max_batch / full, cfg.latency_bound_s, requests,
                          max_batch, service, ctx.budget.remaining)
    key = {"precision": precision, "image_size": size, "max_batch": max_batch,
           "latency_bound_s": cfg.latency_bound_s}
    context = {"engine": ENGINE, "device": dev, "requests": requests,
               "tried": [{"rate": ld.rate, **ld.summary()} for ld in found.loads],
               "stopped_by": found.stopped_by, "batch1_latency_s": one}
    best = found.best
    if best is None:
        low = found.loads[0]
        notes.append(f"server: no rate tried kept p99 within {cfg.latency_bound_s * 1e3:g} ms; "
                     f"at {low.rate:,.3g} requests/s the p99 was {low.percentile(0.99) * 1e3:,.3g}"
                     f" ms (one image alone takes {one * 1e3:,.3g} ms)")
        return [median_of("server_latency", {**key, "rate": low.rate}, low.latencies, "s",
                          higher_is_better=False,
                          context={**context, **low.summary(), "meets_bound": False})]
    return [
        Measurement(metric="server_throughput", key=key, value=best.rate, unit="samples/s",
                    statistic="max", samples=[ld.rate for ld in found.loads
                                              if ld.percentile(0.99) <= cfg.latency_bound_s],
                    higher_is_better=True, context={**context, **best.summary()}),
        median_of("server_latency", {**key, "rate": best.rate}, best.latencies, "s",
                  higher_is_better=False, context={**context, **best.summary(),
                                                   "meets_bound": True}),
    ]


def generation(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str,
               precision: str, notes: list[str]) -> list[Measurement]:
    preset = resolved(cfg.preset, "preset")
    prompt, new = resolved(cfg.prompt_tokens, "prompt_tokens"), resolved(cfg.new_tokens,
                                                                          "new_tokens")
    out: list[Measurement] = []
    batches = list(resolved(cfg.decode_batches, "decode_batches"))
    for i, b in enumerate(batches):
        if i and ctx.budget.remaining() <= 0:
            notes.append(f"generation at batch {', '.join(map(str, batches[i:]))} skipped, "
                         "because the time budget ran out")
            break
        key = {"preset": preset, "precision": precision, "batch": b}
        try:
            first, step = models.generate(precision, b, prompt, 2)  # warm-up
            ctx.meter.timed_once(first, dev)
            ctx.meter.step_times(step, 1, dev)
            first, step = models.generate(precision, b, prompt, new)
            ttft = ctx.meter.timed_once(first, dev)
            steps = ctx.meter.step_times(step, new - 1, dev)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"generation at batch {b} skipped, because its KV cache does not fit")
            free_memory()
            break
        out += _generation_measurements(key, b, prompt, new, ttft, steps, dev)
    return out


def _generation_measurements(key: dict[str, Any], batch: int, prompt: int, new: int,
                             ttft: float, steps: list[float], dev: str) -> list[Measurement]:
    context = {"engine": "PyTorch eager, a preallocated KV cache, greedy", "device": dev,
               "prompt_tokens": prompt, "new_tokens": new}
    k = {**key, "prompt_tokens": prompt}
    return [
        total_over_time("prefill_throughput", k, batch * prompt / ttft, [batch * prompt / ttft],
                        "tokens/s", context),
        median_of("time_to_first_token", k, [ttft], "s", higher_is_better=False,
                  context=context),
        median_of("time_per_output_token", key, steps, "s", higher_is_better=False,
                  context=context),
        total_over_time("decode_throughput", key, batch * len(steps) / sum(steps),
                        [batch / s for s in steps], "tokens/s", context),
    ]


def measure(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str,
            precisions: list[str], notes: list[str]) -> list[Measurement]:
    """Every part in turn, each with its share of what is left (the simulator runs this with
    its own models)."""
    parts = list(resolved(cfg.parts, "parts"))
    out: list[Measurement] = []
    # "fp32" means fp32: cuDNN runs convolutions in TF32 unless told otherwise, which on an
    # A100, H100, L4 or RTX 4090 would read 2-3x true fp32. Fixed shapes (the batch sizes,
    # the server's power-of-two buckets): cuDNN's autotuner picks the fastest kernels, as the
    # resnet50 probe lets it.
    ctx.meter.set_tf32(False)
    ctx.meter.set_cudnn_benchmark(dev, True)
    for i, part in enumerate(parts):
        ctx.progress(part, i, len(parts))
        sub = dataclasses.replace(ctx, budget=Budget(ctx.budget.remaining() / (len(parts) - i),
                                                     clock=ctx.clock))
        if part == "offline":
            out += offline(sub, cfg, models, dev, precisions, notes)
        elif part == "server":
            out += serve(sub, cfg, models, dev, precisions[0], out, notes)
        else:
            out += generation(sub, cfg, models, dev, precisions[0], notes)
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
    out = measure(ctx, cfg, models, dev, precisions, notes)
    if dev != "cpu":
        name = ctx.meter.device_name(dev)
        for m in out:
            m.context["gpu_name"] = name
    return ProbeOutput(out, notes=notes, params={"precisions": precisions})
