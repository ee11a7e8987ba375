"""The pipeline probe's real half: the loader's batches trained on, in steady state.

After the first step (allocation, cuDNN's autotuning) the batches the workers prefetched
meanwhile are discarded and at least one round of the workers (a batch from each) is trained
on untimed, its waits kept. Then whole rounds are timed, at least MIN_ROUNDS: each step between
two device events (the device's own time for it), the host's wait for its batch apart, and each
round's wall between two device syncs. Each batch is copied to the device on a side stream from
pinned memory while the step before it runs, as real trainers do, so the device can be kept
busy all the time (utilisation 1.0, not compute / (compute + copy)).

What timed rounds alone can hide: batches the workers finished ahead (a full prefetch buffer,
two a worker) are trained on at the step's speed, so early rounds read the buffer, not the
loader. Two figures guard against it: the rate the steps took batches at over the later half of
the rounds, and the rate the workers made them at over every timed round, from their own
stamps (Loader.made): each worker's batches over the time between its first and last one in
the window, summed over the workers, which no buffer inflates and no phase of the workers'
rounds against the window's edges moves. The steady rate is the workers' where it is clearly
the lower (MADE_BELOW), else the rate taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchbench.analysis.derive import LOADER_DISAGREES
from benchbench.analysis.derive import PIPELINE_MIN_ROUNDS as MIN_ROUNDS
from benchbench.probes.api import ProbeContext
from benchbench.probes.meter import SideStream, Staged
from benchbench.workloads._training import Precision, Step

# The fewest timed rounds the probe reports at all, labelled few: a figure with a spread.
FEW_ROUNDS = 2
# The workers' rate decides where it is below this share of the rate taken: the two count the
# same batches, the workers' within a batch or two at the window's edges.
MADE_BELOW = 0.95


class Source(Protocol):
    """What the pipeline needs of a loader: a _loaders.Loader, or the simulator's."""

    parallel: int
    prefetch: int
    start: str
    made: list[tuple[float, int, int]]

    @property
    def corrupt(self) -> int: ...
    def made_clock(self) -> float: ...
    def stream(self) -> Iterator[Any]: ...
    def __enter__(self) -> Source: ...
    def __exit__(self, *exc: object) -> None: ...


class Trainer(Protocol):
    """What the pipeline needs of a trainer: ResNetTrainer, or emulated.SleepTrainer.
    `prepare` copies a batch to the device (run on the side stream); `use` trains on it."""

    def prepare(self, x: Any, y: Any) -> Any: ...
    def use(self, batch: Any) -> None: ...
    def set_synthetic_batch(self, batch: int, image: int) -> None: ...
    def step(self, precision: Precision) -> Step: ...


@dataclass
class Rounds:
    """Timed rounds of the workers: per round its wall and images, per step its wait and its
    device time; and what the workers made over the same window."""

    walls: list[float] = field(default_factory=list)
    images: list[int] = field(default_factory=list)
    waits: list[list[float]] = field(default_factory=list)
    computes: list[list[float]] = field(default_factory=list)
    made: float | None = None  # images/s the workers made within the window (made_rate)

    @property
    def judged(self) -> int:
        """The first round the rate taken is judged from: the later half."""
        return len(self.walls) // 2

    @property
    def taken_ips(self) -> float:
        j = self.judged
        return sum(self.images[j:]) / sum(self.walls[j:])

    def steady(self) -> tuple[float, str]:
        """(images/s, "made" or "taken"): the rate the pipeline sustains."""
        taken, made = self.taken_ips, self.made
        if made is not None and made < MADE_BELOW * taken:
            return made, "made"
        return taken, "taken"


def made_rate(made: list[tuple[float, int, int]], start: float, end: float) -> float | None:
    """Images/s the workers made between `start` and `end`: each worker's images after its
    first batch in the window over the time from that batch to its last, summed. None where a
    worker that made a batch in the window made no second one (too short a window to say)."""
    by: dict[int, list[tuple[float, int]]] = {}
    for t, images, worker in made:
        if start <= t <= end:
            by.setdefault(worker, []).append((t, images))
    rate = 0.0
    for stamps in by.values():
        stamps.sort()
        span = stamps[-1][0] - stamps[0][0]
        if len(stamps) < 2 or span <= 0:
            return None
        rate += sum(k for _, k in stamps[1:]) / span
    return rate if by else None


@dataclass
class RealHalf:
    rounds: Rounds
    context: dict[str, Any]
    notes: list[str]
    trainer: Trainer
    step: Step


class _Feed:
    """Batches from the loader to the device, one ahead: the next batch is taken (the wait
    timed) and its copy issued on the side stream while the step before it runs."""

    def __init__(self, ctx: ProbeContext, batches: Iterator[Any], trainer: Trainer,
                 side: SideStream) -> None:
        self.ctx, self.batches, self.trainer, self.side = ctx, batches, trainer, side
        self.staged: Staged[Any] | None = None
        self.images = 0  # in the staged batch (one with a corrupt file holds fewer)

    def fetch(self) -> float:
        """Take the next batch and issue its copy; returns the host's wait for it."""
        t0 = self.ctx.clock()
        x, y = next(self.batches)
        waited = self.ctx.clock() - t0
        self.staged, self.images = self.side.put(lambda: self.trainer.prepare(x, y)), len(x)
        return waited

    def use(self) -> int:
        """Train on the staged batch from now on; returns its images."""
        assert self.staged is not None, "fetch before use"
        self.trainer.use(self.side.take(self.staged))
        return self.images


def _warm(ctx: ProbeContext, feed: _Feed, step: Step, group: int, dev: str, share_s: float
          ) -> tuple[int, float, list[float]]:
    """Warm steps in whole rounds of the workers: at least one round and policy.warmup_steps,
    and policy.warmup_s while that is within a quarter of `share_s`. Returns (steps, seconds,
    each step's wait for its next batch)."""
    wanted = -(-max(ctx.policy.warmup_steps, 1) // group) * group
    t0, done, waits = ctx.clock(), 0, []
    while done < wanted or (ctx.clock() - t0 < ctx.policy.warmup_s
                            and ctx.clock() - t0 < share_s / 4):
        for _ in range(group):
            feed.use()
            step()
            waits.append(feed.fetch())
        done += group
    ctx.meter.sync(dev)
    return done, ctx.clock() - t0, waits


def _timed(ctx: ProbeContext, feed: _Feed, step: Step, loader: Source, group: int, n: int,
           dev: str) -> Rounds:
    """`n` timed rounds, then the batches the workers had finished by the window's end, so
    that what they made within it is counted (the loader's clock: Loader.made_clock)."""
    out = Rounds()
    ctx.meter.sync(dev)
    made_from = len(loader.made)
    w0 = loader.made_clock()
    for _ in range(n):
        t0 = ctx.clock()
        waits, events, images = [], [], 0
        for _ in range(group):
            images += feed.use()
            events.append(ctx.meter.event(dev))
            step()
            events.append(ctx.meter.event(dev))
            waits.append(feed.fetch())
        ctx.meter.sync(dev)
        out.walls.append(ctx.clock() - t0)
        out.images.append(images)
        out.waits.append(waits)
        out.computes.append([ctx.meter.elapsed(events[2 * i], events[2 * i + 1])
                             for i in range(group)])
    w1 = loader.made_clock()
    if loader.made:
        # A batch finished before the window's end may still wait in the buffer: take them
        # (untrained) up to the first made after it, at most a buffer's worth.
        for _ in range(loader.prefetch + loader.parallel):
            if loader.made[-1][0] > w1:
                break
            next(feed.batches)
        out.made = made_rate(loader.made[made_from:], w0, w1)
    return out


def _plan_rounds(round_s: float, wanted: int, share_s: float) -> tuple[int, bool]:
    """(timed rounds, few): `wanted`, fewer when the share is short, never under FEW_ROUNDS
    (then `few`, as under MIN_ROUNDS)."""
    fit = int(share_s // round_s) if round_s > 0 else wanted
    n = max(FEW_ROUNDS, min(wanted, fit))
    return n, n < MIN_ROUNDS


def real_half(ctx: ProbeContext, precision: Precision, steps: int, dev: str, loader: Source,
              make_trainer: Callable[[], Trainer], share_s: float,
              alone_ips: float | None = None) -> RealHalf:
    """The real half within `share_s` (see the module's docstring). `alone_ips`, the loader's
    rate on its own at this configuration (the dataloader probe's), when known: a steady rate
    above LOADER_DISAGREES times it is timed again where the share allows."""
    start = ctx.clock()
    batches = loader.stream()  # runs on into new passes; their start-up cost counts
    first = next(batches)  # every worker has started
    trainer = make_trainer()
    step = trainer.step(precision)
    side = ctx.meter.side_stream(dev)
    trainer.use(side.take(side.put(lambda: trainer.prepare(*first))))
    first_s = ctx.meter.timed_once(step, dev)  # allocation, cuDNN's autotuning
    # The workers kept decoding during that step: their finished batches would arrive at
    # once and time the buffer rather than the loader.
    for _ in range(loader.prefetch):
        next(batches)
    group = max(1, loader.parallel)
    feed = _Feed(ctx, batches, trainer, side)
    # The drain left every worker starting its next batch at once: this wait is about one
    # worker's batch time, the loader's own rate inside the pipeline.
    first_wait = feed.fetch()
    ctx.progress(f"input pipeline: warm-up in rounds of {group}", 1, 4)
    warm_n, warm_s, warm_waits = _warm(ctx, feed, step, group, dev, share_s)
    warm_waits = [first_wait, *warm_waits[:-1]]  # each warm step's wait for its own batch
    round_s = warm_s * group / warm_n
    wanted = max(MIN_ROUNDS, -(-steps // group))
    if not loader.made:
        # No stamps to see the workers' own rate by (DALI's threads): the timed batches
        # outnumber what the loader can hold ready twice over, so the later half is past it.
        wanted = max(wanted, -(-2 * loader.prefetch // group))
    n, few = _plan_rounds(round_s, wanted, share_s - (ctx.clock() - start))
    ctx.progress(f"input pipeline: {n} timed rounds of {group} steps", 2, 4)
    rounds = _timed(ctx, feed, step, loader, group, n, dev)
    context: dict[str, Any] = {
        "first_step_s": first_s, "prefetched_discarded": loader.prefetch,
        "warmup_steps": warm_n, "steps_per_round": group, "worker_start": loader.start,
        "warmup_waits_s": [round(w, 5) for w in warm_waits],
        "h2d_copy": "side stream, overlapped" if dev != "cpu" else "none: the CPU trains"}
    steady, _ = rounds.steady()
    left = share_s - (ctx.clock() - start)
    if alone_ips and steady > LOADER_DISAGREES * alone_ips:
        n_again = _plan_rounds(round_s, wanted, left)[0]
        if n_again >= MIN_ROUNDS:
            context["first_window_ips"] = round(steady, 2)
            ctx.progress(f"input pipeline: {n_again} rounds again: {steady:,.0f} images/s is "
                         f"over {LOADER_DISAGREES:g}x the loader alone", 2, 4)
            rounds = _timed(ctx, feed, step, loader, group, n_again, dev)
            few = False
    notes = []
    if few:
        of = f"rounds of the {group} workers" if group > 1 else "batches"
        notes.append(f"few rounds: {len(rounds.walls)} {of} timed on loader batches, under "
                     f"the {MIN_ROUNDS} that show a steady state, because the time budget "
                     "allowed no more")
    context["few_steps"] = few
    return RealHalf(rounds, context, notes, trainer, step)


def round_context(r: Rounds) -> dict[str, Any]:
    """What a report needs of the timed rounds beside their samples."""
    _, by = r.steady()
    made = r.made
    return {"timed_rounds": len(r.walls), "judged_from_round": r.judged + 1,
            "steps": sum(len(w) for w in r.waits), "taken_ips": round(r.taken_ips, 2),
            "made_ips": round(made, 2) if made is not None else None,
            "steady_by": by, "round_waits_s": [round(sum(w), 5) for w in r.waits],
            "round_walls_s": [round(w, 5) for w in r.walls]}
