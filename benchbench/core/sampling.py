"""Warm-up, then timed repeats until the spread is small enough or the time budget runs out.

The clock is injected, so the policy is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchbench.core.stats import cv
from benchbench.core.timing import Clock


@dataclass(frozen=True)
class RepeatPolicy:
    min_repeats: int = 5
    max_repeats: int = 50
    target_cv: float = 0.02
    warmup_s: float = 0.5
    warmup_steps: int = 1  # warm-up calls made even when the budget is already spent

    def __post_init__(self) -> None:
        if self.min_repeats < 1 or self.max_repeats < self.min_repeats:
            raise ValueError("need 1 <= min_repeats <= max_repeats")


@dataclass
class Budget:
    """A probe's time budget, shared out among the measurements it still has to make."""

    total_s: float
    clock: Clock = time.perf_counter
    start: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.clock()

    def remaining(self) -> float:
        return max(0.0, self.total_s - (self.clock() - self.start))

    def deadline(self, items_left: int) -> float:
        """Deadline for the next measurement when `items_left` (including it) remain."""
        return self.clock() + self.remaining() / max(1, items_left)


@dataclass(frozen=True)
class SampleSet:
    samples: list[float]
    warmup_runs: int
    stop: str  # why sampling stopped: "target_cv", "budget" or "max_repeats"


def warm_up(call: Callable[[], object], policy: RepeatPolicy, deadline: float,
            clock: Clock = time.perf_counter) -> int:
    """Untimed calls: at least policy.warmup_steps, then more until policy.warmup_s has passed
    or the deadline comes. Returns how many were made."""
    t0 = clock()
    done = 0
    while done < policy.warmup_steps or (
        clock() - t0 < policy.warmup_s and clock() < deadline
    ):
        call()
        done += 1
    return done


def collect(sample: Callable[[], float], policy: RepeatPolicy, deadline: float,
            clock: Clock = time.perf_counter, warmup: bool = True) -> SampleSet:
    """Warm up (unless the caller already did), then call `sample` (which returns one timed
    value) until a stop condition.

    At least policy.min_repeats samples are always taken, even past the deadline: a median of
    fewer is not worth reporting.
    """
    warmups = warm_up(sample, policy, deadline, clock) if warmup else 0
    samples: list[float] = []
    stop = "max_repeats"
    while len(samples) < policy.max_repeats:
        samples.append(sample())
        if len(samples) < policy.min_repeats:
            continue
        if cv(samples) <= policy.target_cv:
            stop = "target_cv"
            break
        if clock() >= deadline:
            stop = "budget"
            break
    return SampleSet(samples=samples, warmup_runs=warmups, stop=stop)
