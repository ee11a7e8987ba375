"""Change points in one machine's series of runs: where a figure moved to a new level, how far,
and how significantly. Pure functions, no I/O.

Each point is one run, given as its values per round. The unit the test counts is the run (the
mean of the logarithms of its rounds): a run's rounds share its day (the driver, a neighbour's
load, the clock of that night), so counting them as independent would call ordinary
run-to-run noise a change, which the history would then report night after night.

Two steps, as Apache Otava (formerly Hunter; Fleming et al., "Hunter: Using Change Point
Detection to Hunt for Performance Regressions", ICPE 2023) does them:
1. Candidates: ruptures' PELT (exact, deterministic; KernelCPD with a linear kernel is the
   least-squares cost, in C) on the runs' log values, with a BIC-like penalty of PENALTY ×
   σ² × ln(n), σ the run-to-run noise estimated robustly from successive differences (so the
   steps themselves do not inflate it).
2. Significance: each candidate gets a two-sided Student t-test between the segments on
   either side of it; the weakest one above `alpha` is dropped and its neighbours' tests are
   redone on the merged segments, until every change point left is significant (Otava's
   merge step; its default significance, 0.001, is DEFAULT_ALPHA here). The p-value is the
   test's times the number of places in the two segments the split could have been
   (Bonferroni): the candidate is the best of them, and its bare p is too small. On 400
   series of 40 runs of pure 10% CV noise the bare p called a change in 11, this in none, and
   it found planted steps as often (scripts/history_bench.py --noise).
ruptures, numpy and scipy are imported inside the functions that need them.

Why ruptures rather than Apache Otava itself: both were tried on the same series (both find the
planted steps at their runs; on 100 series of 40 runs of 10% CV noise Otava 0.8.0 called a
change in 2, this in none). Otava is deterministic and tests every change point, but
apache-otava 0.8.0 pins numpy 2.2.0 and scipy < 1.17 on Python 3.11, which would downgrade what
torch and benchbench run on, and installs google-cloud-bigquery, slack-sdk, pg8000 and requests
with it (325 MB in a fresh virtual environment); its detector is reached through the internals
of a command-line tool for Graphite and Postgres. ruptures needs numpy and scipy only (a 1.3 MB
wheel), is exact and deterministic, and its KernelCPD runs in C (a 1,000-run series in
milliseconds); it gives no significance, which the t-test merge above supplies, as Otava's
does.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_ALPHA = 0.001
DEFAULT_THRESHOLD_PCT = 5.0
# 3 σ² ln n per change point (BIC's 2 σ² ln n, a little stricter): the t-test decides, this
# only keeps the candidates few.
PENALTY = 3.0
MIN_RUNS = 3  # a series shorter than this has no change point to find


@dataclass(frozen=True)
class Shift:
    """A change point: the series moved to a new level at point `at` (the first point of the
    new segment)."""

    at: int
    before: float  # the level of the segment before: the median of its runs' round values
    after: float
    change_pct: float  # signed, + is better whichever way the metric points
    p_value: float
    runs: tuple[int, int]  # points in the segments before and after


@dataclass(frozen=True)
class Segment:
    start: int  # first point
    stop: int  # one past the last point
    level: float  # the median of its round values


def _run_logs(points: Sequence[Sequence[float]]) -> list[float]:
    return [statistics.fmean(math.log(float(v)) for v in p) for p in points]


def noise(logs: Sequence[float]) -> float:
    """The run-to-run noise (σ of the log values) from successive differences, robustly: a
    step moves one difference, not the median of them."""
    if len(logs) < 3:
        return 0.0
    diffs = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    mid = statistics.median(diffs)
    mad = statistics.median(abs(d - mid) for d in diffs)
    return 1.4826 * mad / math.sqrt(2)


def noise_pct(points: Sequence[Sequence[float]]) -> float:
    """The series' run-to-run noise as a CV in percent (runs with a value of 0 or less left
    out)."""
    return math.expm1(noise(_run_logs([p for p in points if p and min(p) > 0]))) * 100


def _t_test(left: Sequence[float], right: Sequence[float]) -> float:
    """Two-sided Student t-test with pooled variance, so that a segment of one run is tested
    against the other segment's spread."""
    n1, n2 = len(left), len(right)
    if n1 + n2 < 3:
        return 1.0
    m1, m2 = statistics.fmean(left), statistics.fmean(right)
    ss = sum((x - m1) ** 2 for x in left) + sum((x - m2) ** 2 for x in right)
    df = n1 + n2 - 2
    se = math.sqrt(ss / df * (1 / n1 + 1 / n2))
    if se == 0:
        return 0.0 if m1 != m2 else 1.0
    from scipy.stats import t

    return float(2 * t.sf(abs(m2 - m1) / se, df))


def _candidates(logs: list[float]) -> list[int]:
    import numpy as np
    import ruptures

    n = len(logs)
    sigma = max(noise(logs), 1e-9)  # identical values: any step is a change
    algo = ruptures.KernelCPD(kernel="linear", min_size=1).fit(np.array(logs).reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=PENALTY * sigma**2 * math.log(n))][:-1]


def _level(points: Sequence[Sequence[float]]) -> float:
    return float(statistics.median(float(v) for p in points for v in p))


def find(points: Sequence[Sequence[float]], higher_is_better: bool = True,
         alpha: float = DEFAULT_ALPHA) -> list[Shift]:
    """The significant change points of a series, one point per run (its values per round,
    all positive), oldest first."""
    if len(points) < MIN_RUNS or any(not p or min(p) <= 0 for p in points):
        return []
    logs = _run_logs(points)
    cuts = _candidates(logs)

    def p_of(i: int) -> float:
        edges = [0, *cuts, len(logs)]
        left, right = logs[edges[i]:edges[i + 1]], logs[edges[i + 1]:edges[i + 2]]
        # Bonferroni over the places the split could have been: it was chosen as the best.
        return min(1.0, _t_test(left, right) * (len(left) + len(right) - 1))

    pvals = [p_of(i) for i in range(len(cuts))]
    while cuts and max(pvals) > alpha:
        weakest = pvals.index(max(pvals))
        del cuts[weakest], pvals[weakest]
        for i in (weakest - 1, weakest):  # the neighbours' segments merged: test them again
            if 0 <= i < len(cuts):
                pvals[i] = p_of(i)
    edges = [0, *cuts, len(points)]
    out = []
    for i, at in enumerate(cuts):
        before = _level(points[edges[i]:at])
        after = _level(points[at:edges[i + 2]])
        pct = (after - before) / before * 100 * (1 if higher_is_better else -1)
        out.append(Shift(at, before, after, pct, pvals[i], (at - edges[i], edges[i + 2] - at)))
    return out


def segments(points: Sequence[Sequence[float]], shifts: Sequence[Shift]) -> list[Segment]:
    edges = [0, *(s.at for s in shifts), len(points)]
    return [Segment(a, b, _level(points[a:b])) for a, b in zip(edges, edges[1:], strict=False)
            if b > a]


def latest_regression(shifts: Sequence[Shift],
                      threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Shift | None:
    """The change point that began the latest segment, when that segment is worse than the one
    before by more than the threshold: the machine is slower now than it was."""
    if shifts and shifts[-1].change_pct < -threshold_pct:
        return shifts[-1]
    return None
