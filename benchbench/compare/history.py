"""One machine's runs in the order they started: a series per headline figure, and one of the
machine as a whole (composite: every figure in one index), their change points
(analysis/change_points.py) and what changed in the environment between the runs on either
side of each one.

Each results.json is read once, and only what the series and the attribution need is kept
(the run's figures per round and a few environment fields), so a thousand runs fit in memory
and in seconds. Runs of another machine (compare/identity.py) are never mixed in: without
--machine they are refused, with it they are set apart and listed.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate, max_t
from benchbench.compare import evidence, identity, series
from benchbench.compare.environment import EXPLAINING, env_value
from benchbench.compare.sides import (
    CompareError,
    load,
    paths_of,
    results_file,
    unfinished_note,
)

ATTRIBUTED = EXPLAINING  # the environment fields a change point is attributed to


@dataclass(frozen=True)
class RunPoint:
    number: int  # 1 for the oldest
    source: str
    started_at: str
    label: str | None
    identity: identity.Identity
    env: dict[str, Any]  # the ATTRIBUTED fields


@dataclass(frozen=True)
class EnvChange:
    field: str
    before: Any
    after: Any
    runs: tuple[int, int]  # the numbers of the runs it changed between


@dataclass
class Series:
    name: str
    probe: str
    metric: str
    key: series.Key
    unit: str
    higher_is_better: bool
    first_device: bool
    runs: list[int] = field(default_factory=list)  # the numbers of the runs that have it
    points: list[tuple[float, ...]] = field(default_factory=list)  # each run's round values
    # each run's figure: the median of its rounds, as the levels are (a peak's too, where the
    # run's own figure is its best round: the dots and the levels must tell the same story)
    values: list[float] = field(default_factory=list)
    # each run's (SM clock, rate per GHz of it) where its samples carry their clock
    clocks: list[tuple[float, float] | None] = field(default_factory=list)
    shifts: list[cp.Shift] = field(default_factory=list)
    segments: list[cp.Segment] = field(default_factory=list)
    causes: list[list[EnvChange]] = field(default_factory=list)  # one list per shift
    # per shift: the (SM clock, rate per GHz of it) of the segments before and after it,
    # where both read their clock (analysis/clocks); None elsewhere
    clock_moves: list[tuple[tuple[float, float], tuple[float, float]] | None] = field(
        default_factory=list)
    outliers: list[cp.OutlierRun] = field(default_factory=list)  # single runs far off
    # what each outlier run's own record shows that the run before it does not, by point
    told: dict[int, tuple[int, list[evidence.Evidence]]] = field(default_factory=dict)
    # what the first run of each new level records that the run before the level (its last
    # that is not an outlier run) does not, by the shift's point: its steal, throttling,
    # clocks, other processes (the environment's own changes are in `causes`)
    shift_told: dict[int, tuple[int, list[evidence.Evidence]]] = field(default_factory=dict)
    # the run-to-run noise, as a CV in percent; None (unknown) with fewer than MIN_RUNS runs
    noise_pct: float | None = None
    # the least slowdown in the middle of these runs that its test calls about half the time,
    # in percent: (found blind, at a recorded change); None where the noise is unknown or 0,
    # or the runs are too few for two levels (max_t.smallest_step)
    sees_pct: tuple[float, float] | None = None
    gate: history_gate.Gate | None = None  # the latest level against the reference
    baseline_missing: bool = False  # --baseline names a run this series has no point of
    # the machine's index alone: the series it is made of, each with its share (composite)
    weights: list[tuple[Series, float]] = field(default_factory=list)
    # the level its tests are held at where not the history's alpha: a GPU against the other
    # GPUs (against_the_others) shares alpha with the figure's other GPUs
    alpha: float | None = None
    # held against its peers (a GPU against the other GPUs): the gate's reference is its
    # first segment, not its best (history_gate.judge's from_first)
    peers: bool = False

    @property
    def regression(self) -> history_gate.Gate | None:
        """The gate, when it says the series regressed."""
        return self.gate if self.gate is not None and self.gate.regressed else None

    def run_at(self, point: int) -> int:
        return self.runs[point]

    @property
    def gpu(self) -> str | None:
        """The GPU it was measured on (a cuda:N device), or None."""
        device = dict(self.key[2]).get("device")
        return device if isinstance(device, str) and device.startswith("cuda:") else None

    def unheld(self, threshold_pct: float) -> bool:
        """Worse than its reference by more than the threshold, but its test did not hold:
        not regressed, and not within the threshold either."""
        return (self.gate is not None and not self.gate.regressed
                and self.gate.change_pct < -threshold_pct)


@dataclass
class History:
    machine: str
    runs: list[RunPoint]
    series: list[Series]
    changes: list[EnvChange]  # between every two successive runs
    set_apart: list[tuple[str, str]]  # (source, why)
    threshold_pct: float
    alpha: float
    notes: list[str] = field(default_factory=list)
    baseline: int | None = None  # the run (number) pinned as the reference
    window: int | None = None  # the reference is the best segment of the last this many runs

    @property
    def regressions(self) -> list[Series]:
        return [s for s in self.series if s.regression is not None]

    @property
    def unheld(self) -> list[Series]:
        """The series beyond the threshold whose test did not hold (Series.unheld)."""
        return [s for s in self.series if s.unheld(self.threshold_pct)]

    def run(self, number: int) -> RunPoint:
        return self.runs[number - 1]


@dataclass(frozen=True)
class _Loaded:
    source: str
    started: datetime
    started_at: str
    label: str | None
    identity: identity.Identity
    env: dict[str, Any]
    figures: list[series.Figure]
    finished: bool  # the run recorded its finish time (sides.UNFINISHED)


def started(source: str, text: str) -> datetime:
    """A run's started_at as an aware time (a naive one is this machine's local time); a text
    that is no ISO date and time is a CompareError naming `source`."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CompareError(f"{source}: started_at {text!r} is not an ISO date and time") from None
    return when if when.tzinfo else when.replace(tzinfo=datetime.now().astimezone().tzinfo)


def _read(path: str) -> _Loaded:
    run = load(path)
    env = run.environment or {}
    return _Loaded(path, started(path, run.started_at), run.started_at, run.label,
                   identity.of(env), {f: env_value(env, f) for f in ATTRIBUTED},
                   series.figures(run), run.finished_at is not None)


def _pick_machine(loaded: list[_Loaded], machine: str | None
                  ) -> tuple[list[_Loaded], list[tuple[str, str]]]:
    groups = identity.machines([x.identity for x in loaded])
    named = sorted(((loaded[g[-1]].identity.name, g) for g in groups), key=lambda x: -len(x[1]))
    listing = ", ".join(f"{n} ({len(g)} run(s))" for n, g in named)
    if machine is None:
        if len(groups) > 1:
            raise CompareError(f"the runs are of {len(groups)} machines: {listing}; give one "
                               "machine's runs, or choose one with --machine NAME")
        return loaded, []
    chosen = [g for n, g in named if n == machine
              or any(machine in (loaded[i].identity.hostname, loaded[i].identity.serial)
                     for i in g)]
    if not chosen:
        raise CompareError(f"--machine {machine}: no run here is of it; the machines here: "
                           f"{listing}")
    keep = set(chosen[0])
    apart = [(x.source, f"another machine: {x.identity.name} (by its {x.identity.basis})")
             for i, x in enumerate(loaded) if i not in keep]
    return [x for i, x in enumerate(loaded) if i in keep], apart


def _causes(runs: list[RunPoint], before: int, after: int) -> list[EnvChange]:
    """What differs between the environments of runs `before` and `after` (numbers)."""
    a, b = runs[before - 1].env, runs[after - 1].env
    return [EnvChange(f, a.get(f), b.get(f), (before, after)) for f in ATTRIBUTED
            if str(a.get(f)) != str(b.get(f))]


def _analyse(s: Series, causes: Callable[[int, int], list[EnvChange]], threshold_pct: float,
             alpha: float, baseline: int | None, window: int | None) -> None:
    # the points whose run's environment differs from the run before's: a step there is
    # tested at its place (change_points.AT_CHANGE)
    changed = [i for i in range(1, len(s.runs)) if causes(s.run_at(i - 1), s.run_at(i))]
    found = cp.detect(s.points, s.higher_is_better, alpha, changed)
    s.shifts, s.segments, s.outliers = found.shifts, found.segments, found.outliers
    # Successive differences need MIN_RUNS runs (change_points.noise reads 0 below that): a
    # series of one or two runs has no measured noise, which is unknown, not ±0%.
    usable = [p for p in s.points if p and min(p) > 0]
    s.noise_pct = cp.noise_pct(s.points) if len(usable) >= cp.MIN_RUNS else None
    s.sees_pct = _sees(len(usable), s.noise_pct, alpha)
    s.causes = [causes(s.run_at(x.at - 1), s.run_at(x.at)) for x in s.shifts]
    s.clock_moves = [_clock_move(s, i) for i in range(len(s.shifts))]
    point = s.runs.index(baseline) if baseline in s.runs else None
    s.baseline_missing = baseline is not None and point is None
    if len(usable) == len(s.points):
        s.gate = history_gate.judge(s.points, found, s.higher_is_better, threshold_pct, alpha,
                                    point, window, from_first=s.peers)


def _sees(m: int, noise_pct: float | None, alpha: float) -> tuple[float, float] | None:
    """Series.sees_pct of m runs at this noise: the smallest slowdown in their middle that the
    blind test, and the test at a recorded change, call about half the time."""
    if not noise_pct:
        return None
    sigma = math.log1p(noise_pct / 100)
    steps = (max_t.smallest_step(m, sigma, alpha),
             max_t.smallest_step(m, sigma, cp.at_change(alpha), given=True))
    if steps[0] is None or steps[1] is None:
        return None
    return -math.expm1(-steps[0]) * 100, -math.expm1(-steps[1]) * 100


def _clock_move(s: Series, i: int
                ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The SM clock and the rate per GHz of it either side of the series' shift i: the median
    of the runs' own readings in the segment before and in the segment after, where at least
    two runs on each side read their clock."""
    if len(s.clocks) != len(s.points) or i + 1 >= len(s.segments):
        return None
    sides = [[c for j in seg.runs if (c := s.clocks[j]) is not None]
             for seg in (s.segments[i], s.segments[i + 1])]
    if any(len(side) < 2 for side in sides):
        return None
    before, after = ((statistics.median(c for c, _ in side),
                      statistics.median(g for _, g in side)) for side in sides)
    return before, after


def _tell(all_series: list[Series], runs: list[RunPoint]) -> None:
    """What each outlier run's own record shows against the run before it that is not one, and
    each change point's first run against the run before its level: steal, throttling, clocks
    and other processes, from the two results.json files (read again: only those runs')."""
    read: dict[int, Any] = {}

    def run_of(number: int) -> Any:
        if number not in read:
            read[number] = load(runs[number - 1].source)
        return read[number]

    def against(s: Series, at: int, odd: set[int]) -> tuple[int, list[evidence.Evidence]] | None:
        before = next((i for i in range(at - 1, -1, -1) if i not in odd), None)
        if before is None:
            return None
        mine, theirs = run_of(s.run_at(at)), run_of(s.run_at(before))
        # the machine's index has no probe of its own: its figures' probes speak for it
        measured = dict.fromkeys((m.probe, m.gpu) for m, _ in s.weights) or {(s.probe, s.gpu)}
        return s.run_at(before), [e for probe, gpu in measured
                                  for e in evidence.against(mine, theirs, probe, gpu, gpu)]

    for s in all_series:
        odd = {o.at for o in s.outliers}
        for o in s.outliers:
            if (told := against(s, o.at, odd)) is not None:
                s.told[o.at] = told
        for x in s.shifts:
            if (told := against(s, x.at, odd)) is not None:
                # the environment's changes between the two runs are the shift's causes
                s.shift_told[x.at] = (told[0], [e for e in told[1]
                                                if e.name not in ATTRIBUTED])


NOISE_FLOOR = 0.001  # σ of the log values: a series of copies weighs no more than 0.1% noise


def index_weights(logs: Sequence[Sequence[float]]) -> list[float]:
    """Each series' share of the index (they sum to 1): the inverse of its run-to-run variance
    (change_points.noise of its runs' log values), its noise never below NOISE_FLOOR."""
    weights = [1 / max(cp.noise(x), NOISE_FLOOR) ** 2 for x in logs]
    return [w / sum(weights) for w in weights]


def index_points(points: Sequence[Sequence[Sequence[float]]], higher_is_better: Sequence[bool],
                 weights: Sequence[float] | None = None) -> list[tuple[float, ...]]:
    """Several series of the same runs (each a list of the runs' rounds, every value above 0)
    as one index per run and round: their geometric mean weighted by the inverse of each
    series' run-to-run variance (change_points.noise), each oriented so that higher is better
    and taken about its own median run, so a typical run reads 1. Round j of a run is round j
    of every series that has one, and the run's value of each that does not (a quick run
    measures some probes twice and others once), weighted alike: so the geometric mean of a
    run's rounds is the index of its series' run values, and its rounds spread as much as the
    rounds that were measured say. `weights`: index_weights of the series, where the caller
    has them already."""
    logs = [cp.run_logs(p) for p in points]
    parts = [(w * (1 if up else -1), statistics.median(x), p, x)
             for w, x, p, up in zip(index_weights(logs) if weights is None else weights, logs,
                                    points, higher_is_better, strict=True)]
    out = []
    for i in range(len(points[0])):
        rounds = max(len(p[i]) for _, _, p, _ in parts)
        out.append(tuple(
            math.exp(sum(w * ((math.log(p[i][j]) if j < len(p[i]) else x[i]) - mid)
                         for w, mid, p, x in parts))
            for j in range(rounds)))
    return out


def composite(all_series: Sequence[Series], runs: Sequence[RunPoint]) -> Series | None:
    """The machine as a whole (index_points): every headline figure that every run measured,
    with no value of 0 or less, in one index. A change the whole machine shares (a driver that
    costs every figure 10%) moves the index by all of it, while its noise is less than any one
    series' where the series' noise is their own: 12 runs drifting 10% at 3% noise, three
    series, exit 3 in 92% of 400 histories against 76% on the series alone
    (scripts/history_accuracy.py --machines; 69% against 64% where half their noise is shared,
    44% and 44% where it is one). The weights keep one noisy figure (a disk that
    reads 0.6 or 2.5 GB/s) from drowning the rest. None with fewer than two such series."""
    every = [s for s in all_series if len(s.runs) == len(runs)
             and all(p and min(p) > 0 for p in s.points)]
    if len(every) < 2:
        return None
    c = Series(f"all {len(every)} headline figures (weighted)", "all", "index",
               ("all", "index", (("series", len(every)),)), "ratio", True, True)
    c.runs = [r.number for r in runs]
    shares = index_weights([cp.run_logs(s.points) for s in every])
    c.points = index_points([s.points for s in every], [s.higher_is_better for s in every],
                            shares)
    c.values = [statistics.median(p) for p in c.points]
    c.weights = list(zip(every, shares, strict=True))
    return c


MIN_GPUS = 3  # a GPU and at least two others to hold it against
AGAINST = "against the other GPUs"


def against_the_others(all_series: Sequence[Series], alpha: float) -> list[Series]:
    """Each GPU's figure against the median of the other GPUs' in the same run, a series per
    GPU of every figure that MIN_GPUS or more GPUs measure. What moves every GPU of the node
    alike (the day, the host, a driver) cancels, so a GPU that fell behind the others shows
    above its own noise alone: 12 runs, each GPU with 1% noise of its own and 3% that the day
    gives them all, one GPU 10% slower from the middle run; its own series exits 3 in 52 of
    100 histories, its series against the others in 100 (at 3% and 3%: 35 and 26, the node
    46; scripts/history_accuracy.py --gpu-nodes). A figure's GPUs share alpha (Bonferroni),
    so a healthy node fails about as often: one question, whether any GPU fell behind, per
    figure. A run counts where the GPU and two others measured the figure; each round of the
    GPU is held against the others' run values. The gate holds such a series against its first
    segment, not its best: a GPU that stood above the others for a few runs while they were
    slower (a driver update that reached it three runs later) is level with them again, not
    10% behind its best."""
    by_figure: dict[series.Key, list[Series]] = {}
    for s in all_series:
        if s.gpu is not None:
            by_figure.setdefault(series.without_device(s.key), []).append(s)
    out = []
    for gpus in by_figure.values():
        if len(gpus) < MIN_GPUS:
            continue
        at_run: dict[int, list[tuple[Series, float]]] = {}
        for g in gpus:
            for run, v in zip(g.runs, g.values, strict=True):
                at_run.setdefault(run, []).append((g, v))
        for g in gpus:
            base = g.name.removesuffix(f" ({g.gpu})")
            r = Series(f"{base} {AGAINST} ({g.gpu})", g.probe, g.metric,
                       (g.key[0], g.key[1], (*g.key[2], ("against", "the other GPUs"))),
                       "ratio", g.higher_is_better, False, alpha=alpha / len(gpus),
                       peers=True)
            for run, rounds in zip(g.runs, g.points, strict=True):
                others = [v for o, v in at_run[run] if o is not g and v > 0]
                if len(others) < MIN_GPUS - 1 or not rounds or min(rounds) <= 0:
                    continue
                mid = statistics.median(others)
                r.runs.append(run)
                r.points.append(tuple(v / mid for v in rounds))
                r.values.append(statistics.median(r.points[-1]))
            if len(r.runs) >= cp.MIN_RUNS:
                out.append(r)
    return out


def _baseline(given: str | None, runs: list[RunPoint]) -> int | None:
    """The run --baseline names: its number in this history, or its path or folder."""
    if given is None:
        return None
    if given.isdigit():
        if 1 <= int(given) <= len(runs):
            return int(given)
        raise CompareError(f"--baseline {given}: this history has runs 1 to {len(runs)}")
    try:
        (path,) = paths_of([given])
    except (CompareError, ValueError):
        raise CompareError(f"--baseline {given}: give one run, by its number in the history "
                           "or its results.json or folder") from None
    for r in runs:
        if results_file(r.source) == results_file(path):
            return r.number
    raise CompareError(f"--baseline {given}: not one of this history's runs")


def build(args: Sequence[str], *, machine: str | None = None,
          threshold_pct: float = cp.DEFAULT_THRESHOLD_PCT,
          alpha: float = cp.DEFAULT_ALPHA, baseline: str | None = None,
          window: int | None = None,
          progress: Callable[[int, int], None] | None = None) -> History:
    """The history of the runs the arguments name (paths, run folders, quoted globs);
    progress(done, total) as the runs are read."""
    paths = paths_of(args)
    if not paths:
        raise CompareError("no run given; give a machine's runs, e.g. 'runs/nightly-*'")
    every = []
    for i, p in enumerate(paths):
        every.append(_read(p))
        if progress is not None:
            progress(i + 1, len(paths))
    every.sort(key=lambda x: (x.started, x.source))
    loaded, apart = _pick_machine(every, machine)
    if len(loaded) < cp.MIN_RUNS:
        have = f"got {len(loaded)}" + (": compare two with `benchbench compare A B`"
                                        if len(loaded) == 2 else "")
        raise CompareError(f"history needs at least {cp.MIN_RUNS} runs of one machine; {have}")
    runs = [RunPoint(i + 1, x.source, x.started_at, x.label, x.identity, x.env)
            for i, x in enumerate(loaded)]
    pinned = _baseline(baseline, runs)
    by_key: dict[series.Key, Series] = {}
    for point, x in zip(runs, loaded, strict=True):
        for f in x.figures:
            s = by_key.get(f.key)
            if s is None:
                s = by_key[f.key] = Series(f.name, f.probe, f.metric, f.key, f.unit,
                                           f.higher_is_better, f.first_device)
            if s.runs and s.runs[-1] == point.number:
                continue  # a measurement the run holds twice: its first stands
            s.runs.append(point.number)
            s.points.append(f.rounds)
            s.values.append(statistics.median(f.rounds))
            s.clocks.append(f.clock)
    names = series.unique_names({k: s.name for k, s in by_key.items()})
    for k, s in by_key.items():
        s.name = names[k]
    whole = composite(list(by_key.values()), runs)
    all_series = (([whole] if whole else []) + list(by_key.values())
                  + against_the_others(list(by_key.values()), alpha))
    # what changed between two runs, once per pair: every series asks of the same pairs
    causes = functools.cache(lambda before, after: _causes(runs, before, after))
    for s in all_series:
        _analyse(s, causes, threshold_pct, alpha if s.alpha is None else s.alpha, pinned,
                 window)
    changes = [c for a, b in zip(runs, runs[1:], strict=False)
               for c in causes(a.number, b.number)]
    notes = [n for n in [unfinished_note([x.source for x in loaded if not x.finished])] if n]
    old = sum(not r.identity.recorded for r in runs)
    if old:
        notes.append(f"{old} run(s) predate the recorded machine identity: their host name and "
                     "GPU UUIDs stand for it")
    _tell(all_series, runs)
    missing = [s.name for s in all_series if s.baseline_missing]
    if missing:
        notes.append(f"--baseline run {pinned} did not measure {', '.join(missing)}: "
                     "those series are held against their best segment instead")
    return History(runs[-1].identity.name, runs, all_series, changes, apart,
                   threshold_pct, alpha, notes, pinned, window)
