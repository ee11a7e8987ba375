"""The server scenario, as MLPerf Inference's LoadGen drives it: requests of one image arrive as
a Poisson process at a set rate, the server batches whatever is queued (up to a max batch) each
time it becomes free, and each request's latency is its completion time less its arrival.

Time is virtual where the server idles and real where it works: every batch is executed on the
device for real and its measured time advances the clock, but an idle gap until the next
arrival is skipped rather than slept through. A request's latency is then what it would have
been in real time, and a rate costs the device's busy time only. The rate search climbs until
the 99th percentile passes the bound, then narrows between the last rate that met it and the
first that did not; where its first rate misses, it steps down until one meets it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

# Service(k) -> seconds the device took for a batch of k requests (measured, synchronized).
Service = Callable[[int], float]

RATE_STEP = 1.5  # each climb multiplies the rate by this much
NARROWING = 2  # bisections between the last pass and the first failure


@dataclass(frozen=True)
class Load:
    """One rate's outcome: the latencies of every request, in seconds, and the batches run."""

    rate: float  # requests/s offered
    latencies: list[float]
    batches: int
    busy_s: float  # the device's time, the real cost of this rate

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def summary(self) -> dict[str, float]:
        return {"p50_s": self.percentile(0.50), "p90_s": self.percentile(0.90),
                "p99_s": self.percentile(0.99), "max_s": max(self.latencies),
                "mean_batch": len(self.latencies) / self.batches}


def offer(rate: float, requests: int, max_batch: int, service: Service, seed: int = 0) -> Load:
    """`requests` Poisson arrivals at `rate` served with dynamic batching up to max_batch."""
    rng = random.Random(seed)
    t, arrivals = 0.0, []
    for _ in range(requests):
        t += rng.expovariate(rate)
        arrivals.append(t)
    clock, i, latencies, batches, busy = 0.0, 0, [], 0, 0.0
    while i < requests:
        clock = max(clock, arrivals[i])  # idle until the next request: skipped, not slept
        j = i
        while j < requests and j - i < max_batch and arrivals[j] <= clock:
            j += 1
        took = service(j - i)
        clock += took
        busy += took
        batches += 1
        latencies += [clock - a for a in arrivals[i:j]]
        i = j
    return Load(rate, latencies, batches, busy)


@dataclass
class Search:
    """The rates tried and the best that met the bound."""

    bound_s: float
    loads: list[Load] = field(default_factory=list)
    stopped_by: str = "done"

    @property
    def best(self) -> Load | None:
        met = [ld for ld in self.loads if ld.percentile(0.99) <= self.bound_s]
        return max(met, key=lambda ld: ld.rate, default=None)


def search(start_rate: float, ceiling: float, bound_s: float, requests: int, max_batch: int,
           service: Service, time_left: Callable[[], float],
           lowest: float | None = None) -> Search:
    """Climb from start_rate (at most `ceiling`) by RATE_STEP until p99 passes bound_s (or the
    rate passes `ceiling`, the offline rate at max_batch: no server sustains more), then bisect
    NARROWING times between the highest rate that met it and the lowest that missed. Where
    every rate so far missed, step down by RATE_STEP² to no lower than `lowest` (by default
    start_rate: no step down), and stop at a miss there. Before each rate, its device time is
    predicted from the rate offered nearest it (requests × the busy time per request there); a
    rate that would not fit time_left() is not offered."""
    out = Search(bound_s)
    start_rate = min(start_rate, ceiling)  # as search.search: no server sustains more
    floor = start_rate if lowest is None else min(lowest, start_rate)
    rate, low, high, narrowed = start_rate, None, None, 0
    while True:
        if out.loads and _device_s(out.loads, rate, requests) > time_left():
            out.stopped_by = "budget"
            return out
        load = offer(rate, requests, max_batch, service, seed=len(out.loads))
        out.loads.append(load)
        if load.percentile(0.99) <= bound_s:
            low = rate if low is None else max(low, rate)
        else:
            high = rate if high is None else min(high, rate)
        if high is None:  # still climbing
            if rate >= ceiling:
                out.stopped_by = "ceiling"
                return out
            rate = min(rate * RATE_STEP, ceiling)
        elif low is None:  # every rate so far missed the bound
            if rate <= floor:
                return out
            rate = max(rate / RATE_STEP ** 2, floor)
        elif narrowed < NARROWING:
            rate, narrowed = statistics.fmean((low, high)), narrowed + 1
        else:
            return out


def _device_s(loads: list[Load], rate: float, requests: int) -> float:
    """A rate's predicted device time: requests × the busy time per request at the rate
    offered nearest it (by ratio). Climbing, that is the last and lower rate, which batched
    less: a little more than the new one costs."""
    near = min(loads, key=lambda ld: abs(math.log(ld.rate / rate)))
    return requests * near.busy_s / len(near.latencies)
