"""Workload `memory_fit`: the largest Llama-style model whose full training step fits here.

For each mode (plain, and with activation checkpointing) it searches the ladder of model sizes
(analysis/memory_fit.py) by real steps: at a candidate size it builds the model on the device,
runs two steps with the real optimizer (AdamW; bf16 autocast over fp32 master weights, or fp16
with GradScaler where the GPU has no bf16), records the allocator's high-water mark and the
step times, and frees everything before the next size. On a GPU the search is a binary search
that starts where the closed-form estimate says the device's memory ends; an out-of-memory
step is an answer, not an error. On a CPU, which never reports out of memory (the kernel's
OOM killer ends the process instead), it climbs from the small end while a size's estimate
stays under a share of the free RAM and its time fits the budget, and measures the process's
peak resident memory instead of the allocator's.

Every measured point stands beside its closed-form estimate (weights, gradients, optimizer
states, working copy, activations by layer shape) and the measured ÷ estimated ratio.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil
import torch

from benchbench.analysis.memory_fit import LADDER, Estimate, estimate
from benchbench.core.results import Measurement
from benchbench.probes._devices import is_oom
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, resolved
from benchbench.workloads._training import (
    PRECISIONS,
    free_memory,
    make_step,
    usable_precisions,
)
from benchbench.workloads.memory_fit.config import MemoryFitConfig
from benchbench.workloads.models.llama import Llama


@dataclass
class Point:
    """One size tried in one mode."""

    rung: str
    mode: str
    estimate: Estimate
    fits: bool | None  # None: not tried (see why)
    peak_B: float | None = None
    step_s: list[float] = field(default_factory=list)
    why: str | None = None  # why it was not tried
    bound: str | None = None  # what kept it from being tried: "time", "free RAM", "estimate"

    @property
    def ratio(self) -> float | None:
        return self.peak_B / self.estimate.total if self.peak_B and self.estimate.total else None


# A size whose estimate is this many times the device's memory is not tried: the estimators
# err by tens of percent, not by this.
FAR_BEYOND = 2.0

# attempt(rung, mode) -> Point; refuse(rung, mode, tried, modes left) -> (why, bound) or None;
# est(rung, mode) -> the closed-form estimate
Attempt = Callable[[str, str], Point]
Refusal = Callable[[str, str, list[Point], int], "tuple[str, str] | None"]
Estimator = Callable[[str, str], Estimate]


def estimator(seq: int, precision: str) -> Estimator:
    """A rung's closed-form estimate in a mode at micro-batch 1, in the run's precision: the
    one the attempt reports, the search's bounds and the free-RAM refusal all judge by."""

    def est(rung: str, mode: str) -> Estimate:
        return estimate(LADDER[rung], seq, 1, precision, mode == "checkpointing")

    return est


def search(ladder: list[str], mode: str, attempt: Attempt, refuse: Refusal, modes_left: int,
           gpu: bool, memory: float | None, est: Estimator) -> list[Point]:
    """The points tried for one mode, in the order tried. On a GPU a binary search over the
    ladder, starting at the largest size whose estimate fits `memory`; on a CPU the ladder
    from its small end. A size `refuse` turns down ends the search upwards, with its reason."""
    tried: list[Point] = []

    def refused(rung: str) -> bool:
        got = refuse(rung, mode, tried, modes_left)
        if got:
            tried.append(Point(rung, mode, est(rung, mode), None, why=got[0], bound=got[1]))
        return got is not None

    if not gpu:
        for rung in ladder:
            if refused(rung):
                break
            tried.append(attempt(rung, mode))
        return tried
    lo, hi = -1, len(ladder)  # ladder[lo] fits (or lo = -1); ladder[hi] does not (or hi = n)
    if memory is not None:  # sizes the estimate puts far beyond the device are not tried
        far = [i for i, r in enumerate(ladder) if est(r, mode).total > FAR_BEYOND * memory]
        if far:
            hi = far[0]
            tried += [Point(r, mode, est(r, mode), None, bound="estimate",
                            why=f"its estimate of {est(r, mode).total / 1e9:,.0f} GB is over "
                                f"{FAR_BEYOND:g}x the device's {memory / 1e9:,.0f} GB")
                      for r in ladder[hi:]]
    guess = max((i for i, r in enumerate(ladder[:hi])
                 if memory is None or est(r, mode).total <= memory), default=0)
    while hi - lo > 1:
        mid = guess if lo < guess < hi else (lo + hi) // 2
        if refused(ladder[mid]):
            hi = mid
            continue
        point = attempt(ladder[mid], mode)
        tried.append(point)
        lo, hi = (mid, hi) if point.fits else (lo, mid)
    return tried


# glibc's mallopt and malloc_trim. Freed tensors must go back to the kernel for one size's
# resident memory not to count in the next's: with a fixed mmap threshold every large block
# is mapped on its own and unmapped when freed (a dynamic threshold grows after the first
# large free, and later blocks then stay in the heap).
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_B = 1 << 20


def _release_to_kernel() -> None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_B)
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the baseline is then read as it is
        pass


class _RssPeak:
    """The process's resident memory at its highest while running, sampled every 5 ms: a CPU
    keeps no allocator high-water mark."""

    def __init__(self) -> None:
        _release_to_kernel()
        self.proc = psutil.Process()
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> _RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def _two_steps(ctx: ProbeContext, rung: str, seq: int, checkpointing: bool, precision: str,
               dev: str) -> list[float]:
    """Build the model on the device and time two full training steps. Its tensors go with
    this frame: nothing outlives the call but the times."""
    shape = LADDER[rung]
    with torch.device(dev):
        model = Llama(shape, seq, checkpointing)
        tokens = torch.randint(0, shape.vocab, (1, seq + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=dev != "cpu")
    x, y = tokens[:, :-1], tokens[:, 1:]
    step = make_step(lambda: model(x, y), opt, PRECISIONS[precision], dev)
    return [ctx.meter.timed_once(step, dev) for _ in range(2)]


def device_attempt(ctx: ProbeContext, dev: str, seq: int, precision: str, est: Estimator
                   ) -> Attempt:
    """Two real training steps of a rung in a mode on `dev`; out of memory is a Point that
    does not fit."""

    def attempt(rung: str, mode: str) -> Point:
        checkpointing = mode == "checkpointing"
        point = Point(rung, mode, est(rung, mode), False)
        free_memory()
        ctx.meter.reset_peak_memory(dev)
        rss = _RssPeak() if dev == "cpu" else None
        try:
            with rss or contextlib.nullcontext():
                point.step_s = _two_steps(ctx, rung, seq, checkpointing, precision, dev)
            point.fits = True
            point.peak_B = ctx.meter.peak_memory(dev) if rss is None else \
                float(rss.peak - rss.base)
        except RuntimeError as exc:
            if not is_oom(exc):
                raise
        free_memory()
        return point

    return attempt


def refusal(ctx: ProbeContext, dev: str, est: Estimator, ram_share: float) -> Refusal:
    """Why a rung may not be tried now: its predicted time, from the last measured point
    scaled by parameters (a step's work grows with them), is beyond this mode's share of the
    budget; on a CPU also an estimate over `ram_share` of the free RAM."""
    measured: list[Point] = []

    def refuse(rung: str, mode: str, tried: list[Point], modes_left: int
               ) -> tuple[str, str] | None:
        measured.extend(p for p in tried if p.fits and p not in measured)
        shape = LADDER[rung]
        if dev == "cpu":
            need = est(rung, mode).total
            free = psutil.virtual_memory().available
            if need > ram_share * free:
                return (f"its estimate of {need / 1e9:,.1f} GB is over {ram_share:.0%} of the "
                        f"{free / 1e9:,.1f} GB of free RAM (a CPU does not report out of "
                        "memory: the OOM killer would end the run)"), "free RAM"
        share = ctx.budget.remaining() / max(1, modes_left)
        if not measured:
            return None if share > 0 else ("the time budget ran out", "time")
        last = measured[-1]
        # A build and two steps, as the last point took, grown with the parameters.
        cost = shape.params() / LADDER[last.rung].params() * (sum(last.step_s) +
                                                               max(last.step_s))
        if cost <= share:
            return None
        return (f"two steps would take ~{cost:,.3g} s (scaled from {last.rung}'s "
                f"{max(last.step_s):.3g} s a step), beyond the {share:,.3g} s left for this "
                "mode"), "time"

    return refuse


def run(ctx: ProbeContext, cfg: MemoryFitConfig) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    notes: list[str] = []
    precision = resolved(cfg.precision, "precision")
    if not usable_precisions(dev, (precision,), notes, ctx.facts):
        raise ProbeSkipped("; ".join(notes))
    seq = resolved(cfg.seq_len, "seq_len")
    memory = _memory_total(ctx, dev)
    est = estimator(seq, precision)
    points = search_modes(ctx, list(resolved(cfg.ladder, "ladder")),
                          list(resolved(cfg.modes, "modes")),
                          device_attempt(ctx, dev, seq, precision, est),
                          refusal(ctx, dev, est, cfg.ram_share), dev, est, memory)
    gpu_name = torch.cuda.get_device_name(dev) if dev != "cpu" else None
    return output(points, dev, seq, precision, memory, notes, gpu_name)


def search_modes(ctx: ProbeContext, ladder: list[str], modes: list[str], attempt: Attempt,
                 refuse: Refusal, dev: str, est: Estimator, memory: float | None
                 ) -> list[Point]:
    """Every mode's search in turn, each with its share of what is left of the budget (the
    simulator runs this with its own attempt)."""
    points: list[Point] = []
    for i, mode in enumerate(modes):
        ctx.progress(f"{mode}: searching {len(ladder)} sizes", i, len(modes))
        points += search(ladder, mode, attempt, refuse, len(modes) - i, dev != "cpu", memory,
                         est)
    ctx.progress("done", len(modes), len(modes))
    return points


def _memory_total(ctx: ProbeContext, dev: str) -> float | None:
    if dev == "cpu":
        return float(psutil.virtual_memory().total)
    gpus = ctx.facts.get("gpus") or []
    return float(gpus[0]["memory_total"]) if gpus and gpus[0].get("memory_total") else None


def output(points: list[Point], dev: str, seq: int, precision: str, memory: float | None,
           notes: list[str], gpu_name: str | None) -> ProbeOutput:
    """Each fitted point's peak, ratio and step time; per mode the largest that fitted."""
    source = "torch.cuda.max_memory_allocated" if dev != "cpu" else \
        "the process's peak resident memory above its level before the model was built"
    out: list[Measurement] = []
    for mode in dict.fromkeys(p.mode for p in points):
        far = [p.rung for p in points if p.mode == mode and p.bound == "estimate"]
        if far:
            notes.append(f"{', '.join(far)} {mode} not tried, because their estimates are over "
                         f"{FAR_BEYOND:g}x the device's {(memory or 0) / 1e9:,.0f} GB")
    for p in points:
        if p.fits is None and p.bound != "estimate":
            notes.append(f"{p.rung} {p.mode} skipped, because {p.why}")
        if not p.fits or p.peak_B is None:
            continue
        key = {"mode": p.mode, "rung": p.rung, "seq_len": seq, "precision": precision}
        context = {"params": p.estimate.params, "estimate": p.estimate.to_dict(),
                   "ratio": p.ratio, "step_s": p.step_s, "memory_source": source,
                   "device": dev, "gpu_name": gpu_name}
        out += [
            Measurement(metric="step_peak_memory", key=key, value=p.peak_B, unit="B",
                        statistic="max", samples=[p.peak_B], higher_is_better=False,
                        context=context),
            Measurement(metric="estimate_ratio", key=key, value=p.ratio or 0.0, unit="ratio",
                        statistic="median", samples=[p.ratio or 0.0], higher_is_better=False,
                        context=context),
            Measurement(metric="step_time", key=key, value=p.step_s[-1], unit="s",
                        statistic="median", samples=list(p.step_s), higher_is_better=False,
                        context={**context, "first_step_includes": "allocation and the "
                                                                   "optimizer's states"}),
        ]
    for mode in dict.fromkeys(p.mode for p in points):
        largest = _largest(mode, [p for p in points if p.mode == mode], seq, precision, memory,
                           dev, gpu_name, notes)
        if largest is not None:
            out.append(largest)
    return ProbeOutput(out, notes=notes, params={"seq_len": seq, "precision": precision})


def _largest(mode: str, mine: list[Point], seq: int, precision: str, memory: float | None,
             dev: str, gpu_name: str | None, notes: list[str]) -> Measurement | None:
    """The mode's largest fitted size, with what stopped the climb above it: memory (the
    answer), time or free RAM (a lower bound only), or the ladder's end."""
    fitted = [p for p in mine if p.fits]
    best = max(fitted, key=lambda p: p.estimate.params, default=None)
    above = [p for p in mine if not p.fits and (best is None or p.estimate.params >
                                               best.estimate.params)]
    nxt = min(above, key=lambda p: p.estimate.params, default=None)
    if best is None:
        notes.append(f"{mode}: no size fitted" + (
            f" ({nxt.rung} ran out of memory)" if nxt and nxt.fits is False else ""))
        return None
    bound = "the ladder's end" if nxt is None else "memory" if nxt.fits is False else nxt.bound
    return Measurement(
        metric="largest_model", key={"mode": mode, "seq_len": seq, "precision": precision},
        value=float(best.estimate.params), unit="count", statistic="max",
        samples=[float(p.estimate.params) for p in fitted], higher_is_better=True,
        context={"rung": best.rung, "peak_B": best.peak_B, "memory_total_B": memory,
                 "device": dev, "gpu_name": gpu_name, "bounded_by": bound,
                 "next_up": None if nxt is None else {
                     "rung": nxt.rung, "params": nxt.estimate.params,
                     "outcome": "out of memory" if nxt.fits is False else
                     f"skipped, because {nxt.why}"},
                 "tried": [{"rung": p.rung, "fits": p.fits, "peak_B": p.peak_B, "why": p.why}
                           for p in mine]})
