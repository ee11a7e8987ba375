"""The server part without LoadGen: the simulated server (server.py), labelled as such.

Poisson arrivals on a virtual clock, each batch timed alone on the device: a model of a server,
not MLPerf's measurement of one. It runs where LoadGen is not installed (the GPU box has no
network to install it) or is switched off (inference.loadgen=false), and never calls itself
MLPerf's. The bound is chosen as LoadGen's part chooses it (scenarios.choose_bound), and the
rate search starts as that part's does: below where the queue model on the measured batch times
puts the bound.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchbench.core.results import Measurement
from benchbench.probes.api import ProbeContext, median_of, resolved
from benchbench.workloads.inference import server
from benchbench.workloads.inference.config import InferenceConfig
from benchbench.workloads.inference.models import Models
from benchbench.workloads.inference.scenarios import (
    START_SHARE,
    bucket,
    buckets,
    choose_bound,
    queue_model_rate,
)


def label(why: str) -> str:
    return f"simulated server ({why})"


def _call_s(offline_ms: list[Measurement], precision: str, batch: int) -> float | None:
    for m in offline_ms:
        if m.metric == "offline_throughput" and m.key["precision"] == precision and \
                m.key["batch_size"] == batch:
            return batch / m.value
    return None


def serve(ctx: ProbeContext, cfg: InferenceConfig, models: Models, dev: str, precision: str,
          offline_ms: list[Measurement], notes: list[str], why: str,
          engine: str) -> list[Measurement]:
    size = resolved(cfg.image_size, "image_size")
    max_batch, requests = resolved(cfg.max_batch, "max_batch"), resolved(cfg.requests, "requests")
    shapes = buckets(max_batch)
    calls = {b: models.classify(precision, b) for b in shapes}
    for b in shapes:  # each shape once before any is timed: cuDNN picks its kernels
        for _ in range(max(1, ctx.policy.warmup_steps)):
            ctx.meter.timed_once(calls[b], dev)
    # Each shape's time: the sweep's where it measured that batch, else the median of three
    # calls (from one call each, 8 searches on a 2-core VM started at 32 to 118 requests/s).
    times = {b: _call_s(offline_ms, precision, b) or statistics.median(
        ctx.meter.timed_once(calls[b], dev) for _ in range(3)) for b in shapes}
    one, full = times[1], times[max_batch]
    bound, source = choose_bound(cfg.latency_bound_s, dev, one)

    def service(k: int) -> float:
        return ctx.meter.timed_once(calls[bucket(shapes, k)], dev)

    # Start below where the queue model on these batch times puts the bound, as LoadGen's
    # search does; from half of one image at a time, a quick run on an H200 paid for one rate
    # (164 requests/s, 0.03x its offline peak) and reported that floor.
    predicted = queue_model_rate(times, bound, max_batch, [1.0])
    found = server.search(START_SHARE * predicted, max_batch / full, bound, requests, max_batch,
                          service, ctx.budget.remaining, lowest=0.5 / one)
    key = {"precision": precision, "image_size": size, "max_batch": max_batch,
           "latency_bound_s": bound}
    tried = [{"rate": ld.rate, **ld.summary()} for ld in found.loads]
    # A floor when the budget stopped the climb before any rate missed the bound.
    floor = found.stopped_by == "budget" and all(t["p99_s"] <= bound for t in tried)
    context = {"engine": engine, "device": dev, "driver": "simulated", "label": label(why),
               "requests": requests, "tried": tried, "stopped_by": found.stopped_by,
               "lower_bound": floor and found.best is not None, "bound_source": source,
               "batch1_latency_s": one, "batch_s": {str(b): t for b, t in times.items()},
               "predicted_rate": predicted}
    best = found.best
    if best is None:
        low = min(found.loads, key=lambda ld: ld.rate)
        notes.append(f"server ({label(why)}): no rate tried kept p99 within {bound * 1e3:g} "
                     f"ms; at {low.rate:,.3g} requests/s the p99 was "
                     f"{low.percentile(0.99) * 1e3:,.3g} ms (one image alone takes "
                     f"{one * 1e3:,.3g} ms)")
        return [_latency(key, low, {**context, "meets_bound": False})]
    return [
        Measurement(metric="server_throughput", key=key, value=best.rate, unit="samples/s",
                    statistic="max", samples=[ld.rate for ld in found.loads
                                              if ld.percentile(0.99) <= bound],
                    higher_is_better=True, context={**context, **best.summary()}),
        _latency(key, best, {**context, "meets_bound": True}),
    ]


def _latency(key: dict[str, Any], load: server.Load, context: dict[str, Any]) -> Measurement:
    return median_of("server_latency", {**key, "rate": load.rate}, load.latencies, "s",
                     higher_is_better=False, context={**context, **load.summary()})
