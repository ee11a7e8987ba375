"""memory_fit's search, shared by the real run and the simulator: one attempt's skeleton, the
search over the ladder and the bisection between two rungs, and what refuses a size for time
or free RAM. Torch-free: what builds a model and times its steps is handed in (run.py's on a
device, the simulator's against its memory model), and the device's state is read through the
context's Meter only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from benchbench.analysis.memory_fit import (
    LADDER,
    Estimate,
    Shape,
    deeper,
    estimate,
    layers_to_reach,
)
from benchbench.core.units import iec
from benchbench.probes._devices import is_oom
from benchbench.probes.api import ProbeContext


@dataclass
class Point:
    """One size tried in one mode."""

    shape: Shape
    mode: str
    estimate: Estimate
    fits: bool | None  # None: not tried (see why)
    peak_B: float | None = None  # the allocator's high-water mark (on a CPU: resident memory)
    reserved_B: float | None = None  # what the allocator held from the driver at most
    build_s: float | None = None  # building the model and its optimizer, synchronized
    step_s: list[float] = field(default_factory=list)  # the two steps: the first pays start-up
    why: str | None = None  # why it was not tried
    bound: str | None = None  # what kept it from being tried: "time", "free RAM", "estimate"

    @property
    def rung(self) -> str:
        return self.shape.name

    @property
    def ratio(self) -> float | None:
        return self.peak_B / self.estimate.total if self.peak_B and self.estimate.total else None

    @property
    def reserved_ratio(self) -> float | None:
        return (self.reserved_B / self.estimate.total if self.reserved_B and self.estimate.total
                else None)


@dataclass
class Ran:
    """What building one size and running its two steps gave. A peak is given only where the
    device's Meter keeps none: a CPU's resident memory, the simulator's memory model."""

    build_s: float
    step_s: list[float]
    peak_B: float | None = None
    reserved_B: float | None = None


# A size whose estimate is this many times the device's memory is not tried: the estimators
# err by tens of percent, not by this.
FAR_BEYOND = 2.0

# two_steps(shape, mode) -> Ran, raising out of memory when the size does not fit;
# attempt(shape, mode) -> Point; refuse(shape, mode, tried, modes left) -> (why, bound) or None;
# est(shape, mode) -> the closed-form estimate
TwoSteps = Callable[[Shape, str], Ran]
Attempt = Callable[[Shape, str], Point]
Refusal = Callable[[Shape, str, list[Point], int], "tuple[str, str] | None"]
Estimator = Callable[[Shape, str], Estimate]


def estimator(seq: int, precision: str) -> Estimator:
    """A size's closed-form estimate in a mode at micro-batch 1, in the run's precision: the
    one the attempt reports, the search's bounds and the free-RAM refusal all judge by."""

    def est(shape: Shape, mode: str) -> Estimate:
        return estimate(shape, seq, 1, precision, mode == "checkpointing")

    return est


def attempt_with(ctx: ProbeContext, dev: str, est: Estimator, two_steps: TwoSteps) -> Attempt:
    """One size in one mode, as the real run and the simulator both try it: CUDA initialised,
    the cache freed and the high-water marks reset, the build and two steps, the peaks read;
    out of memory is a Point that does not fit."""

    def attempt(shape: Shape, mode: str) -> Point:
        point = Point(shape, mode, est(shape, mode), False)
        # Memory statistics raise until CUDA is initialised (pytorch#49952); a no-op on a CPU.
        ctx.meter.init(dev)
        ctx.meter.free(dev)
        ctx.meter.reset_peak_memory(dev)
        try:
            ran = two_steps(shape, mode)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
        else:
            allocated, reserved = ctx.meter.peak_memory(dev), ctx.meter.peak_reserved(dev)
            point.fits, point.build_s, point.step_s = True, ran.build_s, list(ran.step_s)
            point.peak_B = allocated if allocated is not None else ran.peak_B
            point.reserved_B = reserved if reserved is not None else ran.reserved_B
        ctx.meter.free(dev)
        return point

    return attempt


def search_modes(ctx: ProbeContext, ladder: list[str], modes: list[str], attempt: Attempt,
                 refuse: Refusal, dev: str, est: Estimator, memory: float | None,
                 bisect_steps: int = 0) -> list[Point]:
    """Every mode's search in turn, each with its share of what is left of the budget."""
    shapes = [LADDER[r] for r in ladder]
    points: list[Point] = []
    for i, mode in enumerate(modes):
        ctx.progress(f"{mode}: searching {len(ladder)} sizes", i, len(modes))
        points += search(shapes, mode, attempt, refuse, len(modes) - i, dev != "cpu", memory,
                         est, bisect_steps, earlier=list(points))
    ctx.progress("done", len(modes), len(modes))
    return points


def search(ladder: list[Shape], mode: str, attempt: Attempt, refuse: Refusal, modes_left: int,
           gpu: bool, memory: float | None, est: Estimator, bisect_steps: int = 0,
           earlier: list[Point] | None = None) -> list[Point]:
    """The points tried for one mode, in the order tried. On a GPU a binary search over the
    ladder, starting at the largest size whose estimate fits `memory`, then up to
    `bisect_steps` sizes between the last rung that fits and the first that does not for
    memory (`bisect`); on a CPU the ladder from its small end. A size `refuse` turns down
    ends the search upwards, with its reason. `refuse` also sees the `earlier` modes' points:
    a mode's first size is priced by the last size measured in any mode."""
    tried: list[Point] = []

    def refused(shape: Shape) -> bool:
        got = refuse(shape, mode, [*(earlier or []), *tried], modes_left)
        if got:
            tried.append(Point(shape, mode, est(shape, mode), None, why=got[0], bound=got[1]))
        return got is not None

    if not gpu:
        for shape in ladder:
            if refused(shape):
                break
            tried.append(attempt(shape, mode))
        return tried
    lo, hi = -1, len(ladder)  # ladder[lo] fits (or lo = -1); ladder[hi] does not (or hi = n)
    if memory is not None:  # sizes the estimate puts far beyond the device are not tried
        far = [i for i, s in enumerate(ladder) if est(s, mode).total > FAR_BEYOND * memory]
        if far:
            hi = far[0]
            tried += [Point(s, mode, est(s, mode), None, bound="estimate",
                            why=f"its estimate of {iec(est(s, mode).total)} is over "
                                f"{FAR_BEYOND:g}x the device's {iec(memory)}")
                      for s in ladder[hi:]]
    guess = max((i for i, s in enumerate(ladder[:hi])
                 if memory is None or est(s, mode).total <= memory), default=0)
    while hi - lo > 1:
        mid = guess if lo < guess < hi else (lo + hi) // 2
        if refused(ladder[mid]):
            hi = mid
            continue
        point = attempt(ladder[mid], mode)
        tried.append(point)
        lo, hi = (mid, hi) if point.fits else (lo, mid)
    if bisect_steps and 0 <= lo < hi < len(ladder):
        below = next(p for p in tried if p.shape == ladder[lo] and p.fits)
        above = next(p for p in tried if p.shape == ladder[hi])
        if above.fits is False or above.bound == "estimate":  # a memory bound, not time's
            bisect(below, ladder[hi], mode, attempt, refused, tried, memory, est, bisect_steps)
    return tried


def bisect(below: Point, above: Shape, mode: str, attempt: Attempt,
           refused: Callable[[Shape], bool], tried: list[Point], memory: float | None,
           est: Estimator, steps: int) -> None:
    """Up to `steps` sizes between `below` (a rung that fitted) and `above` (the next rung,
    which did not), appended to `tried`: `below`'s width at more layers, up to as many
    parameters as `above` has (taken not to fit). First the most layers whose estimate, times
    `below`'s measured ratio, is within `memory`; then its neighbour on the side its outcome
    points to (which closes the gap when the estimate was right), and, while the outcomes
    agree, the next neighbour (when it was a layer or two off); then halves of what is left.
    Halving at the third size left the first H200s' answer a lower bound: 7b@37L and 38L
    fitted, then 51L ran out of memory, and 39-50L were never tried. A size refused for time
    ends it."""
    base = below.shape
    lo, hi = base.layers, layers_to_reach(base, above)
    # What the card must give is what the allocator reserves, not only what it hands out.
    ratio = below.reserved_ratio or below.ratio or 1.0
    if memory is None:
        guess = (lo + hi) // 2
    else:
        guess = max((n for n in range(lo + 1, hi)
                     if est(deeper(base, n), mode).total * ratio <= memory), default=lo + 1)
    last: tuple[int, bool] | None = None
    for step in range(steps):
        if hi - lo <= 1:
            break
        if last is None:
            n = guess
        elif step <= 2:  # at 2, the first two agreed: else nothing is left between them
            n = last[0] + 1 if last[1] else last[0] - 1
        else:
            n = (lo + hi) // 2
        n = min(max(n, lo + 1), hi - 1)
        shape = deeper(base, n)
        if refused(shape):
            break
        point = attempt(shape, mode)
        tried.append(point)
        lo, hi = (n, hi) if point.fits else (lo, n)
        last = (n, bool(point.fits))


def refusal(ctx: ProbeContext, dev: str, est: Estimator, ram_share: float) -> Refusal:
    """Why a size may not be tried now: its predicted time is beyond this mode's share of the
    budget; on a CPU also an estimate over `ram_share` of the free RAM. The prediction is the
    last measured point's (in any mode) build and warm (second) step, each grown with the
    parameters (their work grows with them), twice the warm step for the two steps, plus its
    first step's start-up over the warm one, once and as it was: the first step's start-up
    (lazy kernel loading, the optimizer's states) is no per-step cost and must not be scaled
    as one."""
    measured: list[Point] = []

    def refuse(shape: Shape, mode: str, tried: list[Point], modes_left: int
               ) -> tuple[str, str] | None:
        measured.extend(p for p in tried if p.fits and p not in measured)
        if dev == "cpu":
            need = est(shape, mode).total
            free = psutil.virtual_memory().available
            if need > ram_share * free:
                return (f"its estimate of {iec(need)} is over {ram_share:.0%} of the "
                        f"{iec(free)} of free RAM (a CPU does not report out of "
                        "memory: the OOM killer would end the run)"), "free RAM"
        share = ctx.budget.remaining() / max(1, modes_left)
        if not measured:
            return None if share > 0 else ("the time budget ran out", "time")
        last = measured[-1]
        scale = shape.params() / last.shape.params()
        warm = last.step_s[-1]
        start_up = max(0.0, last.step_s[0] - warm)
        build = last.build_s or 0.0
        cost = scale * (build + 2 * warm) + start_up
        if cost <= share:
            return None
        source = last.rung if last.mode == mode else f"{last.rung} {last.mode}"
        return (f"its build and two steps would take ~{cost:,.3g} s (scaled from "
                f"{source}'s {build:.3g} s build and {warm:.3g} s warm step, plus its "
                f"{start_up:.3g} s first-step start-up), beyond the {share:,.3g} s left for "
                "this mode"), "time"

    return refuse
