"""Pacing: a run with a wall-clock promise keeps it when the machine is slower than usual.

`run --quick` on a CPU promises to end within a minute: it is the smoke test CI runs. Its
probes' budgets add up to what a usual moment of this 2-core VM needs to keep that (runner's
TOTAL_S), but the VM has slow hours, when start-up and every probe take 15-30% longer, and a
quick run then ended a second over. The pacer watches the run against its plan: before each
later round of a probe (round 2 onwards, which give compare the run-to-run spread) it compares
the time left before the deadline with what the rest of the plan needs at the pace the run has
shown so far, and where it would not fit, that round is left out. Every probe's first round
runs whole, at its full budget.

Cutting the budgets of the probes still to run was tried first and bought little: a probe's
worker start, imports and smallest unit of work do not shrink with its budget, and the cuts
pile up at the end of the run, where the last probes were already at their smallest. Under a
60% busy loop on one of the two cores, five paced runs took 58.1-61.0 s against 54.5-62.5 s
unpaced. Leaving a round out saves all of its time.

Only runs with a promise are paced: a default run's rounds are its measurement, and a GPU's
timings are still the simulator's estimate (the first GPU runs must show their real overrun).
`--time-budget` pins each probe's seconds, and a multi-rank run must run the same rounds on
every rank: neither is paced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The wall-clock promise, by (--quick, device): the whole run, start-up to exit.
WALL_S = {(True, "cpu"): 60.0}
# What the run does after its probes, on this VM: the reports (1.1-2.1 s) and the interpreter's
# exit with its workers (1.4-2.1 s), with a second to spare.
END_RESERVE_S = 5.0
# A run's probes take about this many times their budgets at a usual moment (43.6-44.0 s for 40
# s on a quick CPU run: each overruns by its worker's start and its smallest unit of work).
# What a run assumes until it has seen its own pace, and the least it assumes after.
PACE = 1.1
# The pace seen is trusted once this many seconds of budget have run.
PACE_SEEN_AFTER_S = 5.0


def promise(quick: bool, device: str, time_budget: float | None = None,
            launched: bool = False) -> float | None:
    """The seconds a run promises to end within, start-up to exit, or None for a run that is
    not paced."""
    if time_budget or launched:
        return None
    return WALL_S.get((quick, "cuda" if device == "cuda" else "cpu"))


@dataclass
class Pacer:
    """Says whether each later round still fits before the run's deadline: `wall_s` after
    `process_start` (time.monotonic), less what the run does after its probes. `wall_s`
    None: every round runs."""

    wall_s: float | None
    process_start: float
    planned: list[float]  # each step's budget in the plan, in order (0 for a skipped probe)
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)
    deadline: float | None = field(init=False)  # when the probes must end
    done_s: float = 0.0  # the budgets of the steps that ran
    left_out: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.deadline = (None if self.wall_s is None
                         else self.process_start + self.wall_s - END_RESERVE_S)

    def keep(self, step: int, probe: str, round_no: int) -> bool:
        """Whether step `step` runs; call finished() after it ran. A first round always does."""
        if self.deadline is None or round_no == 1 or self.planned[step] <= 0:
            return True
        now = self.clock()
        pace = PACE
        if self.done_s >= PACE_SEEN_AFTER_S:
            pace = max(pace, (now - self.started) / self.done_s)
        need = pace * sum(self.planned[step:])
        left = self.deadline - now
        if need <= left:
            return True
        self.left_out.append({"probe": probe, "round": round_no,
                              "planned_s": round(self.planned[step], 2),
                              "behind_s": round(need - left, 2)})
        self.drop(step)
        return False

    def drop(self, step: int) -> None:
        """Step `step` will not run (its probe could not measure here): the plan's rest no
        longer needs its time."""
        self.planned[step] = 0.0

    def finished(self, step: int) -> None:
        self.done_s += self.planned[step]

    def record(self) -> dict[str, Any] | None:
        """What results.json keeps ("pacing"), or None where every round ran."""
        if not self.left_out:
            return None
        return {"wall_s": self.wall_s, "left_out": self.left_out}
