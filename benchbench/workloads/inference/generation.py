"""GPT generation with a KV cache, measured as vLLM's serving benchmark defines its metrics
(vllm/benchmarks/benchmark_serving.py), under its names:

- TTFT: each request's time to its first token (the prefill and one token), mean, median, p99;
- TPOT: each request's (latency - TTFT) / (output tokens - 1), its mean time per output token
  after the first, then mean, median, p99 over the requests;
- ITL: every inter-token latency of every request (one decode step each), mean, median, p99;
- output throughput: every output token over the whole time, prefill included, and beside it
  the decode-only rate (tokens of the decode steps over their time).

At each decode batch b, `generations` generations run back to back, each of b requests that
start together (a static batch: vLLM's benchmark with every request sent at once and at most b
running). A generation's b requests share its TTFT and its steps, so the statistics over the
requests are those over the generations; the samples keep one value a generation (TTFT, TPOT)
or a step (ITL). TTFT here has no queueing in it: vLLM's at a rate that never queues.
Percentiles interpolate linearly, as numpy's (vLLM's) do.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchbench.core.results import Measurement
from benchbench.core.stats import quantile
from benchbench.probes._devices import is_oom
from benchbench.probes.api import ProbeContext, median_of, resolved, total_over_time
from benchbench.probes.meter import free_memory
from benchbench.workloads.inference.config import InferenceConfig
from benchbench.workloads.inference.models import Models

ENGINE = ("PyTorch eager, a preallocated KV cache, greedy, FlashAttention or memory-efficient "
          "attention (not cuDNN's, which builds a graph for every new length)")


def generation(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str,
               precision: str, notes: list[str]) -> list[Measurement]:
    preset = resolved(cfg.preset, "preset")
    prompt, new = resolved(cfg.prompt_tokens, "prompt_tokens"), resolved(cfg.new_tokens,
                                                                          "new_tokens")
    runs = resolved(cfg.generations, "generations")
    out: list[Measurement] = []
    batches = list(resolved(cfg.decode_batches, "decode_batches"))
    last_s = 0.0  # what the last batch cost: a larger one costs at least as much
    for i, b in enumerate(batches):
        left = ctx.budget.remaining()
        if i and left < max(last_s, 1e-9):
            rest = ", ".join(map(str, batches[i:]))
            notes.append(f"generation at batch {rest} skipped, because the time budget ran out"
                         if left <= 0 else
                         f"generation at batch {rest} skipped, because the {left:.3g} s left "
                         f"would not pay for batch {b}: batch {batches[i - 1]} took "
                         f"{last_s:.3g} s")
            break
        key = {"preset": preset, "precision": precision, "batch": b}
        started = ctx.clock()
        try:
            # Warm-up: a prefill and a decode step on the cache the timed ones use.
            first, step = models.generate(precision, b, prompt, new)
            ctx.meter.timed_once(first, dev)
            ctx.meter.step_times(step, 1, dev)
            timed: list[tuple[float, list[float]]] = []
            # A further generation only where the budget pays for one more like the last.
            while len(timed) < runs and (not timed or ctx.budget.remaining() >
                                         timed[-1][0] + sum(timed[-1][1])):
                first, step = models.generate(precision, b, prompt, new)
                timed.append((ctx.meter.timed_once(first, dev),
                              ctx.meter.step_times(step, new - 1, dev)))
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
            notes.append(f"generation at batch {b} skipped, because its KV cache does not fit")
            free_memory()
            break
        out += measurements(key, b, prompt, new, timed, dev)
        last_s = ctx.clock() - started
    return out


def _spread(samples: list[float]) -> dict[str, float]:
    """vLLM's three statistics of a latency: mean, median, p99."""
    return {"mean_s": statistics.fmean(samples), "median_s": statistics.median(samples),
            "p99_s": quantile(samples, 0.99)}


def measurements(key: dict[str, Any], batch: int, prompt: int, new: int,
                 timed: list[tuple[float, list[float]]], dev: str) -> list[Measurement]:
    """The metrics from each generation's (TTFT, decode step times)."""
    context = {"engine": ENGINE, "device": dev, "prompt_tokens": prompt, "new_tokens": new,
               "generations": len(timed), "requests": len(timed) * batch,
               "definitions": "vLLM benchmark_serving"}
    ttfts = [t for t, _ in timed]
    latencies = [t + sum(steps) for t, steps in timed]
    tpots = [sum(steps) / (new - 1) for _, steps in timed]  # (latency - TTFT) / (new - 1)
    itls = [s for _, steps in timed for s in steps]
    k = {**key, "prompt_tokens": prompt}
    return [
        total_over_time("prefill_throughput", k, batch * prompt * len(timed) / sum(ttfts),
                        [batch * prompt / t for t in ttfts], "tokens/s", context),
        median_of("ttft", k, ttfts, "s", higher_is_better=False,
                  context={**context, **_spread(ttfts)}),
        median_of("tpot", key, tpots, "s", higher_is_better=False,
                  context={**context, **_spread(tpots)}),
        median_of("itl", key, itls, "s", higher_is_better=False,
                  context={**context, **_spread(itls)}),
        total_over_time("output_throughput", k, batch * new * len(timed) / sum(latencies),
                        [batch * new / lat for lat in latencies], "tokens/s",
                        {**context, "includes": "prefill and decode"}),
        total_over_time("decode_throughput", key, batch * len(itls) / sum(itls),
                        [batch / s for s in itls], "tokens/s",
                        {**context, "includes": "decode steps only"}),
    ]
