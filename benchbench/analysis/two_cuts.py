"""Two steps in a short history, tested at once. Pure functions, no I/O.

Binary segmentation tests each cut on the segments either side of it. Two −10% steps in 12
runs leave 8 runs for each such test (6 degrees of freedom, and a place chosen among 4), and
the first split of the whole series carries the other step in its variance: in 3% noise
history found 17% of such steps (scripts/history_accuracy.py's run mix; 62% since). Held at
once, the two cuts leave 9 degrees of freedom and lose nothing to the other step.

- The joint test: the best two-cut segmentation (each level at least MIN_SIDE runs) by the
  share of the variance it explains, (SS0 − SS2) / SS2, against the largest share that
  NULL_DRAWS series of pure normal noise of the same length reach over every pair of places
  (simulated, seeded by the length, so a result never changes between runs of the tool). So
  choosing both places is paid for exactly, as the maximum t pays for one.
- Each cut given the other: the maximum t of its place within the stretch the other cut
  leaves it, in the variance about the three levels (max_t.p_max at m − 3 degrees of freedom),
  held at EACH_GIVEN × alpha (at alpha where the rounds' noise was pooled in). A series with one
  real step gives the joint test a pass on that step alone, and this keeps most second cuts
  chosen from its noise out; pure noise passes the joint test at alpha at most.
- The rounds' noise, as the one-split test takes it (max_t's docstring): where the runs
  scatter about the three levels no more than their rounds say, the two variances are pooled,
  and the joint statistic is SS0 − SS2 over their pooled sum of squares, held against the same
  simulated series, each with an independent chi-square for the rounds' sum of squares. As
  there, a pooled pair also needs its test on the runs' own spread to hold, here at
  POOLED_CHECK, and each cut given the other takes the pooled variance.
Up to MAX_RUNS runs, where the simulation is cheap (the pairs grow with the square of the
length: 0.25 s at 12 runs, 2 s at 48 on a 2-core VM, once per length in a process) and the
segments are short; beyond, each step's own segments are long enough for the one-split test.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from benchbench.analysis import max_t

MAX_RUNS = 48
NULL_DRAWS = 20_000
# A pooled pair's joint p on the runs' own spread, at most. The pre-test reads the variance
# about the best pair's levels, the least of every pair's, so runs that scatter 4–5 times what
# their rounds say pass it more often than a single split's: at max_t.POOLED_CHECK (0.01),
# such pure noise of 12 runs at 3% gave 0.0120–0.0123 false change points per series, against
# 0.0090–0.0093 with the pair unpooled; at 0.002, 0.0083–0.0093, and two −10% steps in 12
# runs at 3% noise that the rounds carry are found as often as at 0.01 (242 of 400; 165
# unpooled), a −10% drop and its recovery less so (128 of 400; 194 at 0.01, 122 unpooled).
# scripts/history_accuracy.py --pooling 3000, and its rounds mix at 200 series a cell.
POOLED_CHECK = 0.002
# Each cut of a pair held on the runs' own spread holds given the other at this many alpha,
# once the pair's joint test held at alpha: the joint test bounds pure noise (at most alpha
# pairs, two change points each), and this bounds a second cut drawn from the noise of a series
# with one real step. Measured on 400 seeded series a cell (docs/history-method.md, step 5):
# two −10% steps in 12 runs at 3% noise, run mix, found in 34% at 1, 41% at 2, 58% at 5 and 71%
# at 10; a second cut beside one real step (12 to 48 runs) 0.005–0.010 per series at 1,
# 0.010–0.018 at 5, 0.010–0.035 at 10. A pooled pair keeps 1: its pre-test chose to pool from
# the data, and at 5 runs that scatter 5 times what their rounds say read 0.0107 false change
# points per series instead of 0.0093 (history_accuracy.py --pooling 3000).
EACH_GIVEN = 5


@dataclass(frozen=True)
class Pair:
    at: tuple[int, int]  # the first index of the second and of the third level
    p: float  # the joint test's
    each: tuple[float, float]  # each cut's, given the other
    pooled: bool = False  # the rounds' noise joined the runs' (the runs agreed with it)


def each_given(pair: Pair) -> float:
    """The multiple of alpha each cut of the pair holds at given the other (EACH_GIVEN)."""
    return 1.0 if pair.pooled else EACH_GIVEN


@functools.cache
def _places(m: int) -> Any:
    import numpy as np

    side = max_t.MIN_SIDE
    return np.array([(a, b) for a in range(side, m) for b in range(a + side, m - side + 1)])


def _shares(x: Any, places: Any) -> tuple[Any, Any]:
    """(SS0 − SS2) / SS2 and SS2 of every pair of places, for each row of x."""
    import numpy as np

    m = x.shape[-1]
    zero = np.zeros(x.shape[:-1] + (1,))
    c1 = np.concatenate([zero, np.cumsum(x, axis=-1)], axis=-1)
    c2 = np.concatenate([zero, np.cumsum(x * x, axis=-1)], axis=-1)

    def within(lo: Any, hi: Any) -> Any:
        s1 = c1[..., hi] - c1[..., lo]
        return c2[..., hi] - c2[..., lo] - s1 * s1 / (hi - lo)

    a, b = places[:, 0], places[:, 1]
    ss2 = np.maximum(within(np.zeros_like(a), a) + within(a, b) + within(b, np.full_like(a, m)),
                     1e-300)
    ss0 = within(np.array([0]), np.array([m]))
    return (ss0 - ss2) / ss2, ss2


@functools.cache
def _null(m: int) -> tuple[Any, Any, Any]:
    """Of NULL_DRAWS series of m standard normal values: the largest share of each, sorted;
    and, series by series, the SS0 − SS2 and the SS2 of its best pair."""
    import numpy as np

    rng = np.random.default_rng((m, 2))
    places = _places(m)
    shares, gains, rests = [], [], []
    for _ in range(4):
        share, ss2 = _shares(rng.standard_normal((NULL_DRAWS // 4, m)), places)
        k = share.argmax(axis=1)
        rest = np.take_along_axis(ss2, k[:, None], axis=1)[:, 0]
        shares.append(np.take_along_axis(share, k[:, None], axis=1)[:, 0])
        gains.append(shares[-1] * rest)
        rests.append(rest)
    return np.sort(np.concatenate(shares)), np.concatenate(gains), np.concatenate(rests)


def _p_pooled(gain: float, rest: float, rounds: max_t.Rounds, m: int) -> float:
    """P(pure noise's best pair explains as much as this one, held against the variance
    pooled with the rounds'): the statistic is SS0 − SS2 over (SS2 + the rounds' sum of
    squares), which the best pair also maximises; for each simulated series, the chance that
    an independent chi-square of the rounds' degrees of freedom (in run-variance units) keeps
    it below that series' own, averaged over the series. Exact up to the simulation."""
    import numpy as np
    from scipy.stats import chi2

    gains, rests = _null(m)[1:]
    stat = gain / (rest + rounds.df * rounds.run_var)
    tail = np.mean(chi2.cdf(gains / stat - rests, rounds.df))
    return float(max(tail, 1 / (len(gains) + 1)))


def _t(y: Any, at: int, var: float) -> float:
    left, right = y[:at], y[at:]
    return float(abs(left.mean() - right.mean())
                 / math.sqrt(var * (1 / len(left) + 1 / len(right))))


def best(y: list[float], rounds: max_t.Rounds = max_t.NO_ROUNDS) -> Pair | None:
    """The best two-cut segmentation of the runs' log values y, its joint p and each cut's p
    given the other, the rounds' noise pooled in where the runs agree with it; None where y is
    too short for three levels or longer than MAX_RUNS."""
    import numpy as np

    m = len(y)
    if m < 3 * max_t.MIN_SIDE or m > MAX_RUNS:
        return None
    arr = np.asarray(y, dtype=float)
    arr = arr - arr.mean()
    places = _places(m)
    shares, ss2 = _shares(arr, places)
    k = int(np.argmax(shares))
    p = max_t.tail(_null(m)[0], float(shares[k]))
    a, b = (int(v) for v in places[k])
    var, df = float(ss2[k]) / (m - 3), m - 3
    pooled = False
    if p <= POOLED_CHECK and rounds.df:
        joined, joined_df, pooled = max_t.pooled(var, df, rounds.run_var, rounds.df)
        if pooled:
            var, df = joined, joined_df
            p = _p_pooled(float(shares[k] * ss2[k]), float(ss2[k]), rounds, m)
    each = (max_t.p_max(_t(arr[:b], a, var), b, df),
            max_t.p_max(_t(arr[a:], b - a, var), m - a, df))
    return Pair((a, b), p, each, pooled)
