"""ResNet50's Offline and Server scenarios as MLPerf's LoadGen runs them, against benchbench's
system under test (loadgen_sut), and the p99 bound that fits the device.

- Offline: one LoadGen Offline run at the batch sweep's best batch, for the part's remaining
  budget; LoadGen's samples/s and its VALID/INVALID.
- Server: the highest target rate LoadGen calls VALID at the bound (search.py), with LoadGen's
  p99 and completed samples/s there. Its runs are as long as the budget allows, said beside
  the figure: not a submission-length 600 s run.
- The bound: MLPerf's 15 ms p99 for ResNet-50 on a GPU. On a CPU, or wherever one image alone
  takes longer than that, 5x one image's latency as a short LoadGen SingleStream run measures
  it (its p90), rounded up to whole 10 ms, and labelled as not MLPerf's.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from benchbench.analysis.guide import MLPERF_SERVER_BOUND_S
from benchbench.core.results import Measurement
from benchbench.probes.api import ProbeContext, median_of, total_over_time
from benchbench.workloads.inference import search, server
from benchbench.workloads.inference.search import Harness, Outcome, Settings

# MLPerf's performance_sample_count for ResNet-50 (mlperf.conf): the images the QSL holds.
LIBRARY_SAMPLES = 1024
BOUND_TIMES = 5  # the bound off MLPerf's conditions, in single-image latencies (issue 32)
# ... rounded up to whole 10 ms, so that runs on one machine mostly share the key (within 10
# ms of 5x: one image takes 10-20 ms on a 2-core VM at 32 px, so 50-100 ms bounds)
BOUND_STEP_S = 0.01
# LoadGen sizes an Offline run as 1.1 x min_duration x the expected rate; a run faster than
# expected by more than that ends before min_duration and is INVALID. Asking for 1.2x the
# sweep's rate tolerates a run 30% faster than the sweep, for a run ~30% longer.
OFFLINE_MARGIN = 1.2
# The queue model on the measured batch times predicts where the bound falls; the first run
# starts below it, so that on a CPU, where one run is all the budget pays for, it passes (at
# 0.7 of it one full CPU run in three started just over the bound on a 2-core VM).
START_SHARE = 0.6
PREDICTED_REQUESTS = 2000
WARMUP_S = 0.5  # a warm-up Server run's length, at most: what calibrates the prediction
# The queries a SingleStream run needs before LoadGen's early stopping can call it VALID at
# its 90th percentile (LoadGen's own message on a shorter run: "Need to process at least 64
# queries for early stopping"): the bound rests on a VALID run.
SINGLE_STREAM_QUERIES = 64
OpenHarness = Callable[[str, list[int]], Harness]


def choose_bound(user_s: float | None, device: str, one_s: float,
                 basis: str = "one image's measured") -> tuple[float, str]:
    """(the p99 bound, where it comes from), given one image's measured latency (`basis`
    says how it was measured)."""
    if user_s is not None:
        return user_s, "set by the user (latency_bound_s)"
    if device != "cpu" and one_s < MLPERF_SERVER_BOUND_S:
        return MLPERF_SERVER_BOUND_S, "MLPerf's 15 ms p99 for ResNet-50 (server scenario)"
    where = "on a CPU" if device == "cpu" else "one image alone takes longer than 15 ms"
    return _round_up(BOUND_TIMES * one_s), (
        f"not MLPerf's ({where}): {BOUND_TIMES}x {basis} {one_s * 1e3:,.3g} ms, rounded up")


def _round_up(x: float) -> float:
    """x rounded up to a whole BOUND_STEP_S."""
    return round(math.ceil(x / BOUND_STEP_S - 1e-9) * BOUND_STEP_S, 6)


def buckets(max_batch: int, *also: int) -> list[int]:
    """The batch shapes the SUT pads to: powers of two up to max_batch, max_batch, `also`."""
    return sorted({min(1 << i, max_batch) for i in range(max_batch.bit_length() + 1)}
                  | set(also))


def bucket(shapes: Iterable[int], k: int) -> int:
    """The shape a batch of k samples is padded to: the smallest of `shapes` that holds k, or
    k itself where none does."""
    return min((b for b in shapes if b >= k), default=k)


def _label(scenario: str, s: Settings) -> str:
    if scenario == "Offline":
        return (f"LoadGen Offline, one {s.min_duration_s:,.3g} s run, not a submission-length "
                f"{search.SUBMISSION_RUN_S:g} s run")
    if s.min_query_count < search.EARLY_STOPPING_QUERIES:  # the one run a short budget paid
        return (f"LoadGen Server, one {s.min_duration_s:,.3g} s run of {s.min_query_count} "
                f"queries, not a submission-length {search.SUBMISSION_RUN_S:g} s run")
    # no parenthesis: reports quote the label inside their own
    return (f"LoadGen Server, {s.min_duration_s:,.3g} s runs of {s.min_query_count} queries or "
            f"more, not submission-length {search.SUBMISSION_RUN_S:g} s runs")


def _loadgen_context(o: Outcome, dev: str, engine: str) -> dict[str, Any]:
    r = o.result
    return {"engine": engine, "device": dev, "driver": "loadgen",
            "label": _label(o.settings.scenario, o.settings), "valid": o.valid,
            "why_invalid": r.get("why_invalid"), "loadgen_version": r.get("loadgen_version"),
            "min_duration_s": o.settings.min_duration_s,
            "min_query_count": o.settings.min_query_count, "logs": o.files,
            "wall_s": o.wall_s, "settings_from": r.get("settings_from")}


def offline(ctx: ProbeContext, harness: Harness, key: dict[str, Any], sweep_rate: float,
            batch: int, dev: str, engine: str) -> Measurement:
    """One LoadGen Offline run at the sweep's best batch, for what the part has left, expecting
    the rate the SUT's own calls make (timed through it: the shape warm before LoadGen times
    it)."""
    sut_rate = batch / harness.service_s(batch)
    d = max(search.MIN_RUN_S, ctx.budget.remaining() / OFFLINE_MARGIN)
    o = harness.run(Settings("Offline", sut_rate * OFFLINE_MARGIN, batch, d, 1,
                             name="offline", deadline_s=2 * d * OFFLINE_MARGIN))
    rate = float(o.result.get("samples_per_s") or 0.0)
    if o.abandoned:
        # LoadGen counts the samples answered unserved past the deadline as completed, which
        # would inflate its rate: what the SUT served, over the time it had (INVALID anyway).
        rate = o.served / o.settings.deadline_s
    return total_over_time("loadgen_offline_throughput", {**key, "batch_size": batch}, rate,
                           [rate], "samples/s", {
                               **_loadgen_context(o, dev, engine),
                               "samples": o.result.get("samples_per_query"),
                               "expected_qps": o.settings.rate,
                               "sut_samples_per_s": sut_rate,
                               "sweep_samples_per_s": sweep_rate, "served": o.served,
                               "abandoned": o.abandoned})


def serve(ctx: ProbeContext, harness: Harness, key: dict[str, Any], user_bound: float | None,
          dev: str, engine: str, notes: list[str]) -> list[Measurement]:
    """The Server search: the highest target rate LoadGen calls VALID at the bound. Where the
    budget cannot pay for the early-stopping queries of even one run (a quick run on a CPU),
    one shorter run, and LoadGen's verdict on it, said as such."""
    max_batch = key["max_batch"]
    times = {b: harness.service_s(b) for b in buckets(max_batch)}
    ceiling = max_batch / times[max_batch]
    single = _single_stream(harness, times[1], ctx.budget.remaining())
    one = single.result.get("p90_s") or times[1]
    bound, source = choose_bound(user_bound, dev, one, (
        "LoadGen SingleStream's p90 latency of one image (a VALID run)," if single.valid else
        "LoadGen SingleStream's p90 latency of one image (from a run LoadGen called INVALID: "
        f"{single.result.get('why_invalid') or 'no verdict'}),"))
    warm = _warm_up(harness, times, bound, max_batch, ctx.budget.remaining())
    ratios = _slowdowns(warm, times)
    predicted = queue_model_rate(times, bound, max_batch, ratios)
    d = search.min_duration_s(ctx.budget.remaining())
    queries = search.EARLY_STOPPING_QUERIES
    made = 0

    def cost(rate: float) -> float:
        return search.run_s(rate, d, queries, bound)

    def run(rate: float, retry: bool, n: int = queries, duration: float = d) -> Outcome:
        nonlocal made
        made += 1
        # At most one run's worth past the budget, however long the machine stalls.
        o = harness.run(Settings("Server", rate, max_batch, duration, n, bound,
                                 f"server_{made:02d}", ctx.budget.remaining() + cost(rate)))
        return dataclasses.replace(o, retry=retry)

    def paid() -> float:
        """The lowest rate whose run's queries the budget left still pays for (1% over)."""
        return 1.01 * queries / max(1e-9, ctx.budget.remaining() - bound -
                                    search.RUN_OVERHEAD_S)

    # Below the prediction, but not so low that the first run's queries outlast the budget:
    # a run below `paid` could not be VALID in time, one above it may be.
    start = max(START_SHARE * predicted, paid())
    found = search.search(run, start, ceiling, cost, ctx.budget.remaining, paid) \
        if start <= ceiling else search.Search()
    if not found.runs:
        # One run for what is left, and never shorter than MIN_RUN_S however little that
        # is: a quick run on a CPU still has LoadGen's verdict, p99 and completed rate.
        rate = START_SHARE * predicted
        n = max(math.ceil(rate * search.MIN_RUN_S),
                int(rate * (ctx.budget.remaining() - bound - search.RUN_OVERHEAD_S)))
        found.runs.append(run(rate, False, n, n / rate))
        found.stopped_by = "budget"
    key = {**key, "latency_bound_s": bound}
    first = found.runs[0]
    context = {**_loadgen_context(first, dev, engine), "bound_source": source,
               "batch1_latency_s": one, "batch_s": {str(b): t for b, t in times.items()},
               "serving_slowdown": statistics.median(ratios), "predicted_rate": predicted,
               "stopped_by": found.stopped_by,
               "lower_bound": found.lower_bound, "tried": [o.summary() for o in found.runs],
               # One run shorter than the early stopping needs: no VALID verdict was possible.
               "short_run": first.settings.min_query_count < queries,
               "queries_for_valid": queries,
               "logs": [f for o in [single, warm, *found.runs] for f in o.files]}
    best = found.best
    if best is None:
        low = min(found.runs, key=lambda o: o.rate)
        notes.append(_no_rate(low, bound, queries))
        return [_latency(key, low, {**context, "meets_bound": False})]
    # LoadGen's completed samples/s of the highest VALID run, its target beside it.
    figures = {**_figures(best), "valid": True, "target_qps": best.rate,
               "best_logs": best.files}
    done = [completed(o) for o in found.runs if o.valid]
    return [
        Measurement(metric="server_throughput", key=key, value=completed(best),
                    unit="samples/s", statistic="max", samples=done, higher_is_better=True,
                    context={**context, **figures}),
        _latency(key, best, {**context, **figures, "meets_bound": True}),
    ]


def completed(o: Outcome) -> float:
    """LoadGen's completed samples/s of a run (its target where LoadGen gave none)."""
    return float(o.result.get("completed_per_s") or o.rate)


def _single_stream(harness: Harness, alone_s: float, left_s: float) -> Outcome:
    """A short LoadGen SingleStream run: one image at a time, the next when it is answered.
    Its 90th-percentile latency is MLPerf's own measure of one sample's latency, served by
    the SUT under LoadGen (on a 2-core VM 1.3-1.6x the model's time alone, measured), and
    the bound off MLPerf's conditions is a multiple of it."""
    d = min(WARMUP_S, left_s / 8)
    n = SINGLE_STREAM_QUERIES
    return harness.run(Settings("SingleStream", 1 / alone_s, 1, d, n, name="single_stream",
                                deadline_s=2 * (d + n * alone_s)))


def _warm_up(harness: Harness, times: dict[int, float], bound: float, max_batch: int,
             left_s: float) -> Outcome:
    """A short Server run at half the rate the batch times alone predict: it warms the SUT
    under LoadGen, and its batches say how much slower they run there (_slowdowns)."""
    rate, d = 0.5 * queue_model_rate(times, bound, max_batch, [1.0]), min(WARMUP_S, left_s / 8)
    return harness.run(Settings("Server", rate, max_batch, d, 1, bound, "server_warmup",
                                deadline_s=2 * d + bound))


def _slowdowns(warm: Outcome, times: dict[int, float]) -> list[float]:
    """Each warm-up batch's time over its shape's time alone, both through the SUT: what
    LoadGen's own threads take from the model's cores while it issues queries (a tail on a
    2-core CPU, ~1 on a GPU), so that the first runs start where the SUT can serve."""
    return [t / times[bucket(times, k)] for k, t in warm.service_s] or [1.0]


def queue_model_rate(times: dict[int, float], bound: float, max_batch: int,
                     slowdowns: list[float]) -> float:
    """Where the simulated server's queue model puts the bound, each batch taking its
    shape's time alone times a slowdown drawn from those the warm-up saw (their tail makes
    the p99): instant, nothing runs on the device."""
    draw = random.Random(0)

    def service(k: int) -> float:
        return times[bucket(times, k)] * draw.choice(slowdowns)

    model = server.search(0.5 / times[1], max_batch / times[max_batch], bound,
                          PREDICTED_REQUESTS, max_batch, service, lambda: math.inf)
    return model.best.rate if model.best else 0.5 / times[1]


def _no_rate(low: Outcome, bound: float, queries: int) -> str:
    """Why no server rate: LoadGen's verdict at the lowest rate run, and for a run shorter
    than the early stopping needs, that it was."""
    r, n = low.result, low.settings.min_query_count
    short = (f"the budget paid for one short run of {n} queries, fewer than the {queries} "
             "LoadGen's early stopping needs for a VALID run; " if n < queries else "")
    return (f"server: {short}LoadGen called no rate VALID; at {low.rate:,.3g} requests/s it "
            f"said INVALID ({r.get('why_invalid')}), p99 {(r.get('p99_s') or 0) * 1e3:,.3g} ms "
            f"against the {bound * 1e3:g} ms bound, {r.get('completed_per_s') or 0:,.3g} "
            "samples/s completed")


def _figures(o: Outcome) -> dict[str, Any]:
    """LoadGen's latency figures and rate for one run, and the SUT's mean batch."""
    r = o.result
    return {**{k: r.get(k) for k in ("p50_s", "p90_s", "p99_s", "max_s", "completed_per_s",
                                     "queries")},
            "mean_batch": o.served / o.batches if o.batches else None}


def _latency(key: dict[str, Any], o: Outcome, context: dict[str, Any]) -> Measurement:
    """The run's latencies as the SUT saw them (receipt to answer), every one kept; the
    percentiles in the context are LoadGen's (from its scheduled issue)."""
    return median_of("server_latency", {**key, "rate": o.rate}, o.latencies_s, "s",
                     higher_is_better=False,
                     context={**context, **_figures(o), "valid": o.valid,
                              "why_invalid": o.result.get("why_invalid")})
