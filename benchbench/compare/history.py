"""One machine's runs in the order they started: a series per headline figure, and one of the
machine as a whole (history_series.composite: every figure in one index), their change points
(analysis/change_points.py), what changed in the environment between the runs on either side
of each one, and what the runs around them recorded themselves (steal, throttling, clocks).
The history's data and its derived series live in history_series.py.

Each results.json is read once, and only what the series and the attribution need is kept
(the run's figures per round and a few environment fields), so a thousand runs fit in memory
and in seconds. Runs of another machine (compare/identity.py) are never mixed in: without
--machine they are refused, with it they are set apart and listed. Runs under different
conditions (--quick, an image size: compare/conditions.py) are separate series of a figure,
each searched for change points alone; the gate judges only the series that holds the figure's
latest run, against the runs of its own conditions.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate, max_t
from benchbench.compare import conditions, evidence, identity, series
from benchbench.compare.environment import EXPLAINING, env_value
from benchbench.compare.history_series import (
    EnvChange,
    History,
    RunPoint,
    Series,
    Split,
    against_the_others,
    composite,
)
from benchbench.compare.sides import (
    CompareError,
    interrupted_note,
    load,
    paths_of,
    results_file,
    unfinished_note,
)
from benchbench.core import interruption

ATTRIBUTED = EXPLAINING  # the environment fields a change point is attributed to


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
    conditions: conditions.Recorded
    cut: interruption.Interruption | None = None  # a signal stopped it (taken with the flag)


def started(source: str, text: str) -> datetime:
    """A run's started_at as an aware time (a naive one is this machine's local time); a text
    that is no ISO date and time is a CompareError naming `source`."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CompareError(f"{source}: started_at {text!r} is not an ISO date and time") from None
    return when if when.tzinfo else when.replace(tzinfo=datetime.now().astimezone().tzinfo)


def _read(path: str, include_interrupted: bool = False) -> _Loaded:
    run = load(path, include_interrupted)
    env = run.environment or {}
    return _Loaded(path, started(path, run.started_at), run.started_at, run.label,
                   identity.of(env), {f: env_value(env, f) for f in ATTRIBUTED},
                   series.figures(run), run.finished_at is not None, conditions.recorded(run),
                   cut=interruption.of(run))


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
    s.baseline_missing = baseline is not None and point is None and s.judged
    if len(usable) == len(s.points) and s.judged:
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
            read[number] = load(runs[number - 1].source, include_interrupted=True)  # build took it
        return read[number]

    def against(s: Series, at: int, odd: set[int]) -> tuple[int, list[evidence.Evidence]] | None:
        before = next((i for i in range(at - 1, -1, -1) if i not in odd), None)
        if before is None:
            return None
        mine, theirs = run_of(s.run_at(at)), run_of(s.run_at(before))
        # the machine's index has no probe of its own: its figures' probes speak for it
        measured = list(dict.fromkeys((m.probe, m.gpu) for m, _ in s.weights)) or [(s.probe, s.gpu)]
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


def _kept_apart(s: Series, label: str) -> None:
    """A figure's series of some of its runs' conditions: named and keyed by them, so that it
    is a series of its own in every report ('resnet50 fp32 64px [--quick] (cuda:1)')."""
    suffix = "" if s.first_device else f" ({dict(s.key[2]).get('device')})"
    s.name = f"{s.name.removesuffix(suffix)} [{label}]{suffix}"
    s.key = (s.key[0], s.key[1], (*s.key[2], ("conditions", label)))
    s.condition = label


def _split(by_key: dict[tuple[series.Key, conditions.Signature], Series],
           loaded: list[_Loaded]) -> list[Split]:
    """The figures whose runs differ in their conditions, each series of theirs kept apart
    (_kept_apart) by the conditions that tell it from the figure's others, and judged only
    where it holds the figure's latest run; what split them, with each value's runs."""
    by_figure: dict[series.Key, list[tuple[conditions.Signature, Series]]] = {}
    for (key, sig), s in by_key.items():
        by_figure.setdefault(key, []).append((sig, s))
    fields: dict[conditions.Field, None] = {}
    for kinds in by_figure.values():
        if len(kinds) < 2:
            continue
        differ = conditions.differing({(p, f): v for p, f, v in sig} for sig, _ in kinds)
        latest = max(s.runs[-1] for _, s in kinds)
        for sig, s in kinds:
            _kept_apart(s, conditions.words(tuple(x for x in sig if x[:2] in differ), s.probe))
            s.judged = s.runs[-1] == latest
        fields.update(dict.fromkeys(sorted(differ, key=lambda f: (f[0] is not None, str(f)))))
    out = []
    for probe, f in fields:
        counts: dict[str, int] = {}
        for x in loaded:
            text = x.conditions.get((probe, f))
            if text is not None:
                words = conditions.value_words(f, text)
                counts[words] = counts.get(words, 0) + 1
        now = loaded[-1].conditions.get((probe, f))
        out.append(Split(conditions.title(probe, f), probe, f,
                         sorted(counts.items(), key=lambda kv: -kv[1]),
                         None if now is None else conditions.value_words(f, now)))
    return out


def _composites(figures: list[Series], runs: list[RunPoint], loaded: list[_Loaded],
                differ: set[conditions.Field]) -> list[Series]:
    """The machine as a whole (history_series.composite): over every run, or where the runs
    differ in a run-level condition (--quick), one of the runs of each, the latest run's
    judged."""
    at_run = {f for f in differ if f[0] is None}
    if not at_run:
        whole = composite(figures, runs)
        return [whole] if whole else []
    classes: dict[conditions.Signature, list[RunPoint]] = {}
    for point, x in zip(runs, loaded, strict=True):
        classes.setdefault(conditions.of_figure(x.conditions, at_run, None, {}), []).append(point)
    out = []
    for sig, members in classes.items():
        whole = composite(figures, members)
        if whole is not None:
            _kept_apart(whole, conditions.words(sig))
            whole.judged = members[-1] is runs[-1]
            out.append(whole)
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
          progress: Callable[[int, int], None] | None = None,
          include_interrupted: bool = False) -> History:
    """The history of the runs the arguments name (paths, run folders, quoted globs);
    progress(done, total) as the runs are read. An interrupted run is refused unless
    `include_interrupted`."""
    paths = paths_of(args)
    if not paths:
        raise CompareError("no run given; give a machine's runs, e.g. 'runs/nightly-*'")
    every = []
    for i, p in enumerate(paths):
        every.append(_read(p, include_interrupted))
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
    # the conditions some runs recorded otherwise than others: a figure's runs that differ
    # in one of its own are separate series of it
    differ = conditions.differing(x.conditions for x in loaded)
    by_key: dict[tuple[series.Key, conditions.Signature], Series] = {}
    for point, x in zip(runs, loaded, strict=True):
        for f in x.figures:
            sig = conditions.of_figure(x.conditions, differ, f.probe, f.fields) if differ else ()
            s = by_key.get((f.key, sig))
            if s is None:
                s = by_key[(f.key, sig)] = Series(f.name, f.probe, f.metric, f.key, f.unit,
                                                  f.higher_is_better, f.first_device)
            if s.runs and s.runs[-1] == point.number:
                continue  # a measurement the run holds twice: its first stands
            s.runs.append(point.number)
            s.points.append(f.rounds)
            s.values.append(statistics.median(f.rounds))
            s.clocks.append(f.clock)
    split = _split(by_key, loaded)
    if split:
        runs = [replace(r, conditions=conditions.words(tuple(
                    (x.probe, x.field, v) for x in split
                    if (v := c.conditions.get((x.probe, x.field))) is not None)))
                for r, c in zip(runs, loaded, strict=True)]
    names = series.unique_names({s.key: s.name for s in by_key.values()})
    for s in by_key.values():
        s.name = names[s.key]
    # the series the gate judges (of the latest run's conditions) first
    figures = sorted(by_key.values(), key=lambda s: not s.judged)
    wholes = sorted(_composites(figures, runs, loaded, differ), key=lambda s: not s.judged)
    all_series = wholes + figures + against_the_others(figures, alpha)
    # what changed between two runs, once per pair: every series asks of the same pairs
    causes = functools.cache(lambda before, after: _causes(runs, before, after))
    for s in all_series:
        _analyse(s, causes, threshold_pct, alpha if s.alpha is None else s.alpha, pinned,
                 window)
    changes = [c for a, b in zip(runs, runs[1:], strict=False)
               for c in causes(a.number, b.number)]
    late = unfinished_note([x.source for x in loaded if not x.finished])
    cut = interrupted_note([(x.source, x.cut) for x in loaded if x.cut is not None])
    notes = [n for n in (late, cut) if n]
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
                   threshold_pct, alpha, notes, pinned, window, split)
