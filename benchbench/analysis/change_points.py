"""Change points in one machine's series of runs: where a figure moved to a new level, how far,
and how significantly; and the outlier runs, single runs far off a level their neighbours on
both sides agree on. Pure functions, no I/O. The method and its measured accuracy:
docs/history-method.md.

Each point is one run, given as its values per round. The unit the test counts is the run (the
mean of the logarithms of its rounds): a run's rounds share its day (the driver, a neighbour's
load, the clock of that night), so counting them as independent would call ordinary
run-to-run noise a change. The rounds still say how noisy a run is at least, and a short
history borrows their degrees of freedom when the runs scatter no more than that
(analysis/max_t.py).

1. Outlier runs first: a run OUTLIER_Z robust deviations of the run-to-run noise off the
   median of its neighbours (up to NEIGHBOURS on each side), where the neighbours after it
   agree with those before it, is one bad run (a noisy neighbour for a night), not two change
   points. It is reported as such and kept out of the levels; the latest run cannot show that
   its successors agree, so a latest run that far off is reported as "the latest run" and the
   gate counts it (analysis/history_gate.py).
2. Candidates among the other runs: binary segmentation (the best split of the whole series,
   then of each side, and so on) at WEAK × `alpha`, Otava's "weak" first pass, and PELT's
   cuts (ruptures, exact, at a BIC penalty), which see a drop and its recovery where a single
   split sees one stretch that moved little.
3. Otava's merge: each candidate is tested on the segments either side of it with the
   maximum-t test of max_t.py (which pays exactly for the split having been the best of its
   stretch), times about how many such stretches the series holds; the weakest above `alpha`
   goes and its neighbours are tested again on the merged segments, until all that remain
   hold. Where one holds so, the series is not all noise, and the merge runs again over every
   candidate without the stretches' factor: pure noise reaches that pass only through a cut
   that held in full, so its rate of showing any change point stays what the first pass
   allows, and the steps of a staircase no longer each pay for all the others' stretches.
4. Recorded changes: where the run's recorded environment differs from the run before's (a
   driver, a kernel), the place of a step was given by the record, not chosen among every
   run, so Student's t at that place is the test (Bonferroni over the series' recorded
   changes, which share AT_CHANGE × `alpha`). Each joins the cuts in turn, the strongest
   first, where no cut lies a run from it, and the merge runs again. A run there is an outlier
   run only when the runs after it say the change moved nothing.
5. The newest runs: whether the latest two runs are a new level is the question CI asks after
   every run, so that place too is given, not chosen: Student's t there, at `alpha`, joins
   the cuts, and the merge runs again (as the latest run alone is held by its prediction test
   at `alpha`, analysis/history_gate.py).
6. Two steps at once: where fewer than two cuts held in at most two_cuts.MAX_RUNS runs, the
   best segmentation into three levels is tested as one at `alpha`, each cut holding given
   the other at two_cuts.each_given × `alpha` (analysis/two_cuts.py): the one-split tests see
   each of two steps in a short history on part of its runs and with the other step in their
   variance. Where no cut held and the pair holds jointly but its cuts not each given the
   other, the series is still no noise: one change point, at the best single split.
The default `alpha` is Otava's 0.001, but here it is paid for the choices, so pure noise
rarely shows a change point at all; scripts/history_accuracy.py measures it beside Otava
(docs/history-method.md).

Why not Apache Otava itself: apache-otava 0.8.0 pins numpy 2.2.0 and scipy < 1.17 on
Python 3.11, which would downgrade what torch and benchbench run on, and installs
google-cloud-bigquery, slack-sdk, pg8000 and requests with it (325 MB); it is measured beside
this one by scripts/history_accuracy.py --otava, from a virtual environment of its own.
numpy and scipy are imported inside the functions that need them.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from benchbench.analysis import max_t, two_cuts

DEFAULT_ALPHA = 0.001
DEFAULT_THRESHOLD_PCT = 5.0
MIN_RUNS = 3  # a series shorter than this has no change point to find
OUTLIER_Z = 5.0  # run-to-run noises: normal noise goes that far in one run of 10⁶
NEIGHBOURS = 5  # runs each side that an outlier run is held against
WEAK = 10  # Otava's first pass: candidates at 10 α, for the merge to test at α
PELT_PENALTY = 2.0  # BIC's 2 σ² ln n per cut: candidates only, the merge decides
AT_CHANGE = 10  # a series' recorded changes share 10 α, each tested at its own place
RECORDED = "its recorded change"  # Shift.given: the record gave the place
NEWEST = "the newest two runs' place"  # Shift.given: the question CI asks gave it


def at_change(alpha: float) -> float:
    """What a series' recorded changes share: AT_CHANGE × alpha, never above a half."""
    return min(0.5, AT_CHANGE * alpha)


@dataclass(frozen=True)
class Shift:
    """A change point: the series moved to a new level at point `at` (the first point of the
    new segment)."""

    at: int
    before: float  # the level of the segment before: the median of its runs' round values
    after: float
    change_pct: float  # signed, + is better whichever way the metric points
    p_value: float
    runs: tuple[int, int]  # points in the segments before and after (outlier runs left out)
    # the level its p was held to: alpha, or its share of AT_CHANGE × alpha where it lies at a
    # recorded change and was tested there alone
    held_at: float = DEFAULT_ALPHA
    # where its place was given, not chosen, and Student's t there alone held it: RECORDED or
    # NEWEST; "" where the maximum t over the places it was chosen among held it
    given: str = ""


@dataclass(frozen=True)
class OutlierRun:
    """One run far off the level of its neighbours: a bad (or lucky) night, not a new level."""

    at: int
    value: float  # the median of its rounds
    level: float  # its neighbours' level
    change_pct: float  # signed, + is better whichever way the metric points
    z: float  # how many run-to-run noises off, − is worse
    latest: bool  # the latest run: nothing after it can say it was only one night


@dataclass(frozen=True)
class Segment:
    start: int  # first point
    stop: int  # one past the last point
    level: float  # the median of its round values, its outlier runs left out
    runs: tuple[int, ...] = ()  # its points, outlier runs left out


@dataclass(frozen=True)
class Found:
    shifts: list[Shift]
    outliers: list[OutlierRun]
    segments: list[Segment]


def run_logs(points: Sequence[Sequence[float]]) -> list[float]:
    """Each run's log value: the mean of the logarithms of its rounds (statistics.fmean's
    sum, without its per-value bookkeeping: a history of a thousand runs asks 55 times)."""
    return [math.fsum(map(math.log, p)) / len(p) for p in points]


def noise(logs: Sequence[float]) -> float:
    """The run-to-run noise (σ of the log values) from successive differences, robustly: a
    step moves one difference and an outlier run two, not the median of them. The median
    absolute difference is taken about 0, where the differences of a level lie: about their
    own median, a few runs read too little (with 4 runs, the lesser of two differences'
    distances from the third: 0.61 σ at the median, under σ / 10 in one history in ten), and
    so called a healthy run an outlier run (4 runs in 3% noise: 400 of 3,000 histories, 52
    about 0; scripts/history_accuracy.py --latest)."""
    if len(logs) < 3:
        return 0.0
    diffs = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    return 1.4826 * statistics.median(map(abs, diffs)) / math.sqrt(2)


def noise_pct(points: Sequence[Sequence[float]]) -> float:
    """The series' run-to-run noise as a CV in percent (runs with a value of 0 or less left
    out)."""
    return math.expm1(noise(run_logs([p for p in points if p and min(p) > 0]))) * 100


def within(groups: Iterable[Sequence[float]]) -> tuple[float, int]:
    """The sum of squares of values about their own group's mean, and its degrees of freedom
    (a group of one adds nothing to either)."""
    ss, df = 0.0, 0
    for g in groups:
        mean = statistics.fmean(g)
        ss += sum((x - mean) ** 2 for x in g)
        df += len(g) - 1
    return ss, df


def rounds_noise(points: Sequence[Sequence[float]]) -> max_t.Rounds:
    """The pooled variance of the log values within runs, from the runs of two rounds or
    more."""
    ss, df = within([math.log(float(v)) for v in p] for p in points)
    if df == 0:
        return max_t.NO_ROUNDS
    return max_t.Rounds(ss / df, df, len(points) / sum(1 / len(p) for p in points))


def _level(points: Sequence[Sequence[float]]) -> float:
    return float(statistics.median(float(v) for p in points for v in p))


def change_pct(before: float, after: float, higher_is_better: bool) -> float:
    """The change from before to after in percent, + better whichever way the metric points."""
    return (after - before) / before * 100 * (1 if higher_is_better else -1)


def _alone(logs: list[float], i: int, ref: float, off: float) -> bool:
    """Whether run i is off its neighbours' level alone: neither run beside it lies off that
    level on the same side by half as much. Two runs off together are a level (MIN_SIDE), for
    the segmentation to test: a −10% drop of 4 runs in 12 at 1% noise, back after, has runs
    whose five neighbours a side are mostly of the level around it: 3 of its runs were taken
    for outlier runs, and of its 400 steps in 200 series 50 were found (400 now;
    scripts/history_accuracy.py's recover family, run mix)."""
    return all((logs[j] - ref) * off < off * off / 2 for j in (i - 1, i + 1))


def _outlier_runs(logs: list[float], sigma: float, changes: Collection[int] = ()
                  ) -> tuple[set[int], int | None]:
    """(the interior outlier runs, the latest run when it is that far off) by index. A run
    where the environment changed must have MIN_SIDE runs after it that say the change moved
    nothing; where it changed at the run before the latest, the two are a new level, not the
    latest run alone."""
    odd: set[int] = set()
    n = len(logs)
    for i in range(1, n - 1):
        before = [logs[j] for j in range(max(0, i - NEIGHBOURS), i) if j not in odd]
        after = logs[i + 1:i + 1 + NEIGHBOURS]
        if len(before) < 2 or (i in changes and len(after) < max_t.MIN_SIDE):
            continue
        ref = statistics.median(before + after)
        off = logs[i] - ref
        # the neighbours agree with each other far better than with it: not a step's first run
        agree = abs(statistics.median(after) - statistics.median(before)) < abs(off) / 2
        if abs(off) > OUTLIER_Z * sigma and agree and _alone(logs, i, ref, off):
            odd.add(i)
    # the latest run: off the level of the runs before it, the run just before it on that
    # level (two runs off together are the start of a new level, for the segmentation)
    before = [logs[j] for j in range(max(0, n - 1 - NEIGHBOURS), n - 1) if j not in odd]
    if len(before) < 3 or n - 2 in changes:
        return odd, None
    ref = statistics.median(before)
    off = logs[-1] - ref
    alone = abs(logs[-2] - ref) < abs(off) / 2
    return odd, (n - 1 if abs(off) > OUTLIER_Z * sigma and alone else None)


def _segment(y: list[float], lo: int, hi: int, rounds: max_t.Rounds, alpha: float) -> list[int]:
    """Binary segmentation of y[lo:hi]: the cuts (indices into y) that hold at alpha."""
    split = max_t.best_split(y[lo:hi], rounds)
    if split is None or split.p > alpha:
        return []
    at = lo + split.at
    return [*_segment(y, lo, at, rounds, alpha), at, *_segment(y, at, hi, rounds, alpha)]


def _pelt(y: list[float], sigma: float) -> list[int]:
    """PELT's cuts (ruptures' KernelCPD, the least-squares cost, exact) at a BIC penalty: it
    sees several steps at once, where a single split sees a drop and its recovery as one
    segment that moved little."""
    import numpy as np
    import ruptures

    algo = ruptures.KernelCPD(kernel="linear", min_size=max_t.MIN_SIDE)
    pen = PELT_PENALTY * sigma**2 * math.log(len(y))
    return [int(b) for b in algo.fit(np.array(y).reshape(-1, 1)).predict(pen=pen)][:-1]


def _add_recorded(y: list[float], cuts: list[int], extra: set[int], rounds: max_t.Rounds,
                  each: float) -> list[int]:
    """The cuts, with the recorded changes among `extra` added one at a time, the one that
    holds best on the segment it splits first, while one holds at `each` (a change's share of
    at_change): a merge down from all of them at once can keep a neighbour of the real step
    (its segment holds the step) and drop the step itself."""
    cuts, extra = sorted(cuts), set(extra)
    while extra:
        best, p = 0, math.inf
        for lo, hi in zip([0, *cuts], [*cuts, len(y)], strict=True):
            inside = [r for r in extra if lo < r < hi]
            if inside:  # every place of the segment at once: one array, not one call each
                ps = max_t.p_given_each(y[lo:hi], rounds)
                p, best = min((p, best), *((ps[r - lo - 1], r) for r in inside))
        if p > each:
            break
        cuts = sorted([*cuts, best])
        extra = {r for r in extra if abs(r - best) >= max_t.MIN_SIDE}
    return cuts


def _merge(y: list[float], cuts: list[int], rounds: max_t.Rounds, alpha: float,
           places: dict[int, tuple[float, str]] | None = None, stretches: bool = True
           ) -> tuple[list[int], list[tuple[float, float, str]]]:
    """Otava's merge: drop the weakest cut (its p against the level it is held to) above that
    level, and test its neighbours again on the merged segments, until every cut holds. A cut
    at one of the given `places` (a recorded change, the newest runs' place) may be held by
    Student's t there alone, at the place's level and under its name, instead. `stretches`:
    whether a cut pays for the stretch it tests having been chosen among the series' (False
    once a cut held paying for it: see detect). Each cut's (p, level, the name of the place
    that gave it, or "" where chosen)."""
    given_at = places or {}

    def test(i: int) -> tuple[float, float, str]:
        lo, hi = ([0, *cuts, len(y)][j] for j in (i, i + 2))
        split = max_t.split_at(y[lo:hi], cuts[i] - lo, rounds)
        # the segments either side were chosen among about len(y)/their length such
        # stretches: Bonferroni over them (none for a step in a series that has only it)
        times = len(y) / (hi - lo) if stretches else 1.0
        chosen = (min(1.0, split.p * times), alpha, "")
        if cuts[i] not in given_at or chosen[0] <= alpha:
            return chosen
        # at a given place the place was not chosen: Student's t alone, at that place's
        # level, where the test of a chosen place does not hold it
        level, what = given_at[cuts[i]]
        given = (max_t.p_given(split.t, split.df), level, what)
        return min(chosen, given, key=lambda x: x[0] / x[1])

    tests = [test(i) for i in range(len(cuts))]
    while cuts and max(p / level for p, level, _ in tests) > 1:
        weakest = max(range(len(cuts)), key=lambda i: tests[i][0] / tests[i][1])
        del cuts[weakest], tests[weakest]
        for i in (weakest - 1, weakest):
            if 0 <= i < len(cuts):
                tests[i] = test(i)
    return cuts, tests


# Where no cut held and two steps at once hold jointly but not each given the other, one change
# point at the best split: two −10% steps in 12 runs at 3% noise that the rounds carry were
# found in 30 of 60 without it and 40 with it (Otava 34), four −4% steps in 12 runs at 1%
# noise in 36 of 120 and 99 (Otava 61); pure noise pays at most alpha (scripts/
# history_accuracy.py, docs/history-method.md, step 5). False turns it off, for that measure.
ONE_OF_PAIR = True


def detect(points: Sequence[Sequence[float]], higher_is_better: bool = True,
           alpha: float = DEFAULT_ALPHA, changes: Collection[int] = ()) -> Found:
    """The outlier runs, the significant change points and the segments of a series, one
    point per run (its values per round, all positive), oldest first. `changes`: the points
    whose run's recorded environment differs from the run before's (a driver, a kernel)."""
    n = len(points)
    usable = n > 0 and all(p and min(p) > 0 for p in points)
    if n < MIN_RUNS or not usable:
        return Found([], [], [Segment(0, n, _level(points), tuple(range(n)))] if usable else [])
    logs = run_logs(points)
    rounds = rounds_noise(points)
    # the rounds say how noisy a run is at least, whatever its neighbours happen to read
    sigma = max(noise(logs), math.sqrt(rounds.run_var), 1e-9)
    odd, last = _outlier_runs(logs, sigma, changes)
    kept = [i for i in range(n) if i not in odd and i != last]
    y = [logs[i] for i in kept]
    # candidates: binary segmentation at Otava's "weak" level (10 α) and PELT's; the merge
    # keeps those that hold at α on the segments either side of them
    weak = set(_segment(y, 0, len(y), rounds, min(0.5, WEAK * alpha)))
    if len(y) >= 2 * max_t.MIN_SIDE:
        weak |= set(_pelt(y, sigma))
    cuts, tests = _merge(y, sorted(weak), rounds, alpha)
    # a cut that held paying for its stretch says the series is not all noise; then the other
    # candidates pay only for their place within their own stretch (the maximum t), and
    # pure noise keeps its rate of any change point at all (it reaches here only through
    # a cut that held in full)
    held = bool(cuts)
    if held:
        cuts, tests = _merge(y, sorted(weak), rounds, alpha, stretches=False)
    # then each recorded change (at the first kept run after it) that no cut lies a run from
    # (the noise moves the best split by a run, and there the data placed it) joins them, to
    # be tested at its place; a series' recorded changes share AT_CHANGE α
    recorded = {j for j in (bisect.bisect_left(kept, c) for c in changes)
                if max_t.MIN_SIDE <= j <= len(y) - max_t.MIN_SIDE}
    places: dict[int, tuple[float, str]] = {}
    if recorded:
        each = at_change(alpha) / len(recorded)
        places = {r: (each, RECORDED) for r in recorded}
        extra = {r for r in recorded if all(abs(r - c) >= max_t.MIN_SIDE for c in cuts)}
        cuts = _add_recorded(y, cuts, extra, rounds, each)
        cuts, tests = _merge(y, cuts, rounds, alpha, places, stretches=not held)
    # then the newest runs' place: whether the latest MIN_SIDE runs are a new level is the
    # question CI asks after every run, so that place is given by the question, not chosen
    # among every run, and Student's t there is its test at alpha, as the latest run alone is
    # held by its prediction test at alpha (analysis/history_gate.py). It joins the cuts, and
    # the merge runs again; where it does not hold, nothing changes. A cut that held only
    # because its later segment took in the newest runs' step may go in that merge, as the
    # merge drops any cut that stops holding (keeping such cuts lost 2 steps and kept 2 false
    # change points in the accuracy script's run mix). It costs pure noise at most alpha in
    # false change points per series (docs/history-method.md, step 5).
    newest = len(y) - max_t.MIN_SIDE
    if (last is None and newest >= max_t.MIN_SIDE and newest not in places
            and all(abs(newest - c) >= max_t.MIN_SIDE for c in cuts)):
        places[newest] = (alpha, NEWEST)
        trial, trial_tests = _merge(y, sorted([*cuts, newest]), rounds, alpha, places,
                                    stretches=not held)
        if newest in trial:
            cuts, tests = trial, trial_tests
    # then, where fewer than two cuts held, two steps at once (analysis/two_cuts.py): the
    # one-split tests above see each of two steps in a short history on 2/3 of its runs and
    # with the other step in their variance; a pair replaces the cut it keeps
    if len(cuts) < 2:
        pair = two_cuts.best(y, rounds)
        if (pair and pair.p <= alpha and max(pair.each) <= alpha * two_cuts.each_given(pair)
                and set(cuts) <= set(pair.at)):
            kept_tests = dict(zip(cuts, tests, strict=True))
            cuts = list(pair.at)
            tests = [kept_tests.get(c, (e, alpha, "")) for c, e in zip(cuts, pair.each,
                                                                      strict=True)]
        elif ONE_OF_PAIR and pair and pair.p <= alpha and not cuts:
            # the joint test says the series is not noise (pure noise passes it in alpha of
            # series), but neither cut holds given the other: a change it is, where the best
            # single split puts it, held by the joint test's p (docs/history-method.md, step 5)
            split = max_t.best_split(y, rounds)
            if split is not None:
                cuts, tests = [split.at], [(pair.p, alpha, "")]
    edges = [0, *cuts, len(y)]
    groups = [kept[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    starts = [0] + [g[0] for g in groups[1:]]
    stops = starts[1:] + [n]
    segs = [Segment(a, b, _level([points[i] for i in g]), tuple(g))
            for a, b, g in zip(starts, stops, groups, strict=True)]
    shifts = [Shift(segs[i + 1].start, segs[i].level, segs[i + 1].level,
                    change_pct(segs[i].level, segs[i + 1].level, higher_is_better), tests[i][0],
                    (len(groups[i]), len(groups[i + 1])), tests[i][1], tests[i][2])
              for i in range(len(cuts))]
    outs = []
    for i in sorted(odd | ({last} if last is not None else set())):
        seg = next(s for s in segs if s.start <= i < s.stop)
        value = _level([points[i]])
        z = (logs[i] - math.log(seg.level)) / sigma * (1 if higher_is_better else -1)
        outs.append(OutlierRun(i, value, seg.level, change_pct(seg.level, value, higher_is_better),
                               z, i == last))
    return Found(shifts, outs, segs)


def find(points: Sequence[Sequence[float]], higher_is_better: bool = True,
         alpha: float = DEFAULT_ALPHA, changes: Collection[int] = ()) -> list[Shift]:
    """The significant change points of a series (detect's, without the rest)."""
    return detect(points, higher_is_better, alpha, changes).shifts
