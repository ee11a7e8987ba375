"""The server scenario's rate search over LoadGen runs: the highest target rate that LoadGen
calls VALID at the latency bound, found within a time budget, by a search that one transient
cannot fool.

It climbs from a start rate by RATE_STEP while runs are VALID. A failed run is retried once
only where it stalled (a measured pause: a batch that took STALL times the median of the
batches as large or larger in that run): a stall of the machine fails one run; a rate that
fails without one, or twice, is failed. When the first rate fails it steps down by RATE_STEP²
(no lower than the budget can still pay for) until one passes. Between the highest VALID rate
and the lowest failed rate it then bisects NARROWING times. Before each run it predicts what
the run costs (LoadGen issues for at least min_duration and until min_query_count queries, then
waits for the last answer) and stops when that would not fit what is left. The best rate is a
floor ("at least N") only where no rate above it failed.

Pure: a run is a callable (loadgen_sut.Harness in the probe, the simulator's own in planning).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

RATE_STEP = 1.5  # each climb multiplies the target rate by this much
NARROWING = 2  # bisections between the highest VALID rate and the lowest failed one
# LoadGen's early stopping (loadgen/early_stopping.cc) at the 99th percentile with 99%
# confidence: with no query over the bound, a Server run is VALID only once n queries satisfy
# 0.99^n <= 0.01, so n >= 459 (LoadGen's own message on a shorter run: "Would need to run at
# least 359 more queries" after 100).
EARLY_STOPPING_QUERIES = math.ceil(math.log(0.01) / math.log(0.99))
# MLPerf's submission runs last 600 s (mlperf.conf); a run here lasts what the budget allows.
SUBMISSION_RUN_S = 600.0
MIN_RUN_S = 0.25  # below this LoadGen's start and the last answer's wait dominate a run
PLANNED_RUNS = 6  # a start, a climb, a failure and its retry, two bisections: the budget's runs
RUN_OVERHEAD_S = 0.05  # LoadGen's set-up and log writing per run (measured: 20-30 ms)
# A run stalled where one of its batches took this many times the median of the batches as
# large or larger in that run (with STALL_BATCHES of them to know it by): the machine paused,
# and the run says nothing about the rate. A queue that builds up makes batches larger, and a
# larger batch takes longer, so a batch is held only against batches at least its size.
STALL = 3.0
STALL_BATCHES = 5


@dataclass(frozen=True)
class Settings:
    """One LoadGen run, as benchbench asks for it (loadgen_sut turns it into TestSettings)."""

    scenario: str  # "Offline", "Server" or "SingleStream"
    rate: float  # Server: target queries/s; Offline, SingleStream: the expected samples/s
    batch: int  # the most samples the SUT batches together
    min_duration_s: float
    min_query_count: int
    bound_s: float = 0.0  # Server: the p99 latency bound
    name: str = "run"  # the prefix of its log files
    # Past this many seconds LoadGen stops issuing and the SUT answers what is queued unserved,
    # and the run counts as failed: a machine that stalls for good cannot hold the probe past
    # its budget (LoadGen waits for every query it issued).
    deadline_s: float = math.inf


@dataclass(frozen=True)
class Outcome:
    """One LoadGen run's result: LoadGen's own figures, and what the SUT saw."""

    settings: Settings
    valid: bool  # LoadGen's "Result is : VALID"
    result: dict[str, Any]  # LoadGen's figures (loadgen_sut.read_detail): p99_s, completed…
    latencies_s: list[float]  # each sample, from the SUT's receipt to its completion
    batches: int  # batches the SUT ran
    served: int  # samples the SUT ran through the model and answered
    wall_s: float  # the run's time, LoadGen's set-up and logs included
    files: list[str] = field(default_factory=list)  # its logs, relative to the run folder
    retry: bool = False  # a second run at a rate whose first run failed
    abandoned: int = 0  # samples answered unserved past the deadline (the run then failed)
    service_s: list[tuple[int, float]] = field(default_factory=list)  # (batch, its seconds)

    @property
    def rate(self) -> float:
        return self.settings.rate

    @property
    def stalled(self) -> bool:
        """Whether a batch took STALL times the median of the batches at least its size in
        this run: a pause of the machine, measured (see STALL)."""
        for k in {j for j, _ in self.service_s}:
            peers = sorted(s for j, s in self.service_s if j >= k)
            slowest = max(s for j, s in self.service_s if j == k)
            if len(peers) >= STALL_BATCHES and slowest > STALL * peers[len(peers) // 2] > 0:
                return True
        return False

    def summary(self) -> dict[str, Any]:
        """The figures a report shows for this run."""
        r = self.result
        return {"rate": self.rate, "valid": self.valid, "retry": self.retry,
                "p99_s": r.get("p99_s"), "completed_per_s": r.get("completed_per_s"),
                "queries": r.get("queries"), "served": self.served, "wall_s": self.wall_s,
                "why_invalid": r.get("why_invalid"), "abandoned": self.abandoned,
                "stalled": self.stalled}


class Harness(Protocol):
    """Runs LoadGen against a system under test (loadgen_sut.LoadGenHarness; the simulator's
    SimHarness)."""

    def service_s(self, batch: int) -> float:
        """Seconds the SUT takes for one batch of `batch` samples alone, measured."""

    def run(self, settings: Settings) -> Outcome:
        """One LoadGen test, to its end."""

    def close(self) -> None:
        """Release LoadGen's SUT and sample library."""


def run_s(rate: float, min_duration_s: float, min_queries: int, bound_s: float) -> float:
    """What a Server run at `rate` costs when it passes: LoadGen issues for min_duration and
    until min_queries are issued, then waits out the last query (at most the bound)."""
    return max(min_duration_s, min_queries / rate) + bound_s + RUN_OVERHEAD_S


@dataclass
class Search:
    """The runs made, and what they found."""

    runs: list[Outcome] = field(default_factory=list)
    stopped_by: str = "done"  # done, ceiling, budget
    failed: float | None = None  # the lowest rate that failed
    refuted: list[float] = field(default_factory=list)  # every rate that failed

    @property
    def best(self) -> Outcome | None:
        return max((o for o in self.runs if o.valid), key=lambda o: o.rate, default=None)

    @property
    def lower_bound(self) -> bool:
        """The best rate is only a floor: no rate above it failed (without a stall, or twice;
        a stalled run whose retry the budget could not pay for refutes nothing; a search that
        reached the offline ceiling measured the capacity: no server sustains more)."""
        best = self.best
        return best is not None and self.stopped_by != "ceiling" and not any(
            r > best.rate for r in self.refuted)


def search(run: Callable[[float, bool], Outcome], start: float, ceiling: float,
           cost: Callable[[float], float], time_left: Callable[[], float],
           lowest: Callable[[], float] = lambda: 0.0) -> Search:
    """The highest VALID target rate from `start`, at most `ceiling`. run(rate, retry) is one
    LoadGen run; cost(rate) its predicted seconds; time_left() what the budget has left;
    lowest() the lowest rate whose run it can still pay for (a lower rate's run is longer):
    a step down goes no lower than that."""
    out = Search()
    low: float | None = None  # the highest rate that passed
    rate, narrowed = min(start, ceiling), 0
    while True:
        passed = _verdict(out, run, rate, cost, time_left)
        if passed is None:
            out.stopped_by = "budget"
            return out
        if passed:
            low = rate
        else:
            out.failed = rate if out.failed is None else min(out.failed, rate)
            out.refuted.append(rate)
        if out.failed is None:  # still climbing
            if rate >= ceiling:
                out.stopped_by = "ceiling"
                return out
            rate = min(rate * RATE_STEP, ceiling)
        elif low is None:  # every rate so far failed: down, where lower rates cost longer runs
            rate = max(rate / RATE_STEP ** 2, lowest())
            if rate >= out.failed:
                out.stopped_by = "budget"
                return out
        elif narrowed < NARROWING:
            rate, narrowed = (low + out.failed) / 2, narrowed + 1
        else:
            return out


def _verdict(out: Search, run: Callable[[float, bool], Outcome], rate: float,
             cost: Callable[[float], float], time_left: Callable[[], float]) -> bool | None:
    """Whether `rate` passed: its run, and a second run only where the first failed because it
    stalled. None when the budget cannot pay for the first run, or for the retry that would
    decide."""
    for retry in (False, True):
        if cost(rate) > time_left():
            return None
        outcome = run(rate, retry)
        out.runs.append(outcome)
        if outcome.valid:
            return True
        if not outcome.stalled:
            return False
    return False


def min_duration_s(share_s: float) -> float:
    """Each Server run's min_duration: the part's budget over PLANNED_RUNS, within
    [MIN_RUN_S, SUBMISSION_RUN_S]."""
    return min(SUBMISSION_RUN_S, max(MIN_RUN_S, share_s / PLANNED_RUNS))
