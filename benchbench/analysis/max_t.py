"""The test behind a change point: the best split of a stretch of runs into two levels, and how
often pure noise would give a split that good. Pure functions, no I/O.

The statistic is the largest two-sample t over every place the split could be (each side at
least MIN_SIDE runs): the likelihood-ratio test for one shift in the mean of normal values of
unknown variance (Worsley, "On the likelihood ratio test for a shift in location of normal
populations", JASA 74, 1979). Its p-value is that of the maximum, not of the chosen split, so
the choice is paid for exactly: Bonferroni's factor (the number of places) charged for it twice
over at 12 runs and ten times over at 400, and missed half the steps it could have found.
- Up to EXACT_UP_TO runs the maximum's null distribution is simulated (NULL_DRAWS standard
  normal series, seeded by their length, so that a result never changes between runs of the
  tool); a simulation takes 5–300 ms and is kept for the process.
- Beyond, Siegmund's approximation for the maximum of the standardised statistic (Siegmund,
  "Confidence sets in change-point problems", Int. Stat. Review 56, 1988; James, James and
  Siegmund, Biometrika 74, 1987), the t turned into the normal value of equal tail. Against
  the simulation it reads 0.92–1.19× the true p between 0.05 and 0.001 from 30 runs to 400.

The noise the rounds carry (`Rounds`): when the runs scatter no more than their rounds say
they should (an F-test of the between-run variance against the within-run one, at the 0.25
that Bancroft recommends for such a pooling pre-test), the two are pooled: the within-run
variance has many degrees of freedom, so a short history gets a sharper test. When the runs
scatter more (a day, a driver, a neighbour moves a whole run), the between-run spread alone
stands, as for a series of one value per run. With 10 degrees of freedom the pre-test cannot
tell runs that scatter four or five times the variance their rounds say from runs that do not,
and pooled so, the rounds' variance makes a split of p 0.01 one of p 0.001: on such noise, 12
runs at 3%, up to 0.016 false change points per series. So a pooled split also needs the runs'
own spread to see it at POOLED_CHECK (0.01, ten times the default alpha, what a recorded change
is held to): at most 0.0097 (scripts/history_accuracy.py --pooling, 3,000 series a cell), for
a few of the steps the rounds' noise finds where it is right to pool (the rounds mix, −10% in
the middle of 12 runs at 3% noise: 83% found before, 80% now; the runs alone: 55%).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

MIN_SIDE = 2  # a level is at least two runs: one run alone is an outlier run, not a level
EXACT_UP_TO = 48
NULL_DRAWS = 20_000
POOL_PRETEST = 0.25
POOLED_CHECK = 0.01  # a pooled split's p on the runs' own spread, at most (see above)


@dataclass(frozen=True)
class Rounds:
    """The noise of the runs' rounds: the pooled within-run variance of the log values, its
    degrees of freedom and the rounds per run (harmonic mean); var 0 and df 0 without rounds."""

    var: float
    df: int
    per_run: float

    @property
    def run_var(self) -> float:
        """What the rounds alone say the variance of a run's mean should be."""
        return self.var / self.per_run if self.df else 0.0


NO_ROUNDS = Rounds(0.0, 0, 1.0)  # one value per run: the runs' spread alone


@dataclass(frozen=True)
class Split:
    at: int  # the first index of the right side, within the stretch
    t: float
    df: int
    pooled: bool  # the rounds' noise joined the runs'
    p: float


def agrees(var: float, df: int, rounds_var: float, rounds_df: int) -> bool:
    """Whether values of variance `var` (df degrees of freedom) scatter no more than their
    rounds say they should (`rounds_var`, rounds_df): the F-test at POOL_PRETEST, the pooling
    pre-test (see the module's docstring)."""
    from scipy.stats import f

    return bool(var / rounds_var < f.ppf(1 - POOL_PRETEST, df, rounds_df))


def pooled(var: float, df: int, rounds_var: float, rounds_df: int) -> tuple[float, int, bool]:
    """(variance, df, whether pooled): values' variance with their rounds' joined in where the
    values scatter no more than the rounds say (agrees), else as they were."""
    if rounds_df <= 0 or rounds_var <= 0 or var <= 0 or not agrees(
            var, df, rounds_var, rounds_df):
        return var, df, False
    return (df * var + rounds_df * rounds_var) / (df + rounds_df), df + rounds_df, True


def _splits(x: Any) -> tuple[Any, Any, Any, Any]:
    """Every split of x along its last axis (one series, or one per row), index k: the right
    side starts at k. The left mean minus the right, the sum of squares within the two sides,
    1/k + 1/(m - k), and whether both sides hold MIN_SIDE runs."""
    import numpy as np

    m = x.shape[-1]
    k = np.arange(1, m)
    c1, c2 = np.cumsum(x, axis=-1), np.cumsum(x * x, axis=-1)
    s1, s2 = c1[..., :-1], c2[..., :-1]
    m1, m2 = s1 / k, (c1[..., -1:] - s1) / (m - k)
    ss = np.maximum((s2 - k * m1**2) + (c2[..., -1:] - s2 - (m - k) * m2**2), 0.0)
    return m1 - m2, ss, 1 / k + 1 / (m - k), (k >= MIN_SIDE) & (m - k >= MIN_SIDE)


def _t_all(y: Any, rounds: Rounds) -> tuple[Any, Any, bool]:
    """The t of every split of y (index k: the right side starts at k), its degrees of freedom,
    and whether the rounds' noise was pooled in (decided at the best between-run split)."""
    import numpy as np

    m = len(y)
    diff, ss, scale, valid = _splits(y)
    between = ss / (m - 2)
    t_b = np.where(valid, np.abs(diff) / np.sqrt(np.maximum(between, 1e-300) * scale), 0.0)
    pooled = False
    if rounds.df and rounds.run_var > 0:
        best = int(np.argmax(t_b))
        pooled = (agrees(float(between[best]), m - 2, rounds.run_var, rounds.df)
                  and p_max(float(t_b[best]), m, m - 2) <= POOLED_CHECK)
    if not pooled:
        return t_b, np.full(m - 1, m - 2), False
    var = (ss + rounds.df * rounds.run_var) / (m - 2 + rounds.df)
    t_p = np.where(valid, np.abs(diff) / np.sqrt(np.maximum(var, 1e-300) * scale), 0.0)
    return t_p, np.full(m - 1, m - 2 + rounds.df), True


def best_split(y: list[float], rounds: Rounds) -> Split | None:
    """The best split of the runs' log values y and its p-value; None when y is too short to
    have two levels of MIN_SIDE runs."""
    import numpy as np

    m = len(y)
    if m < 2 * MIN_SIDE:
        return None
    arr = np.asarray(y, dtype=float)
    t, df, pooled = _t_all(arr - arr.mean(), rounds)
    k = int(np.argmax(t))
    return Split(k + 1, float(t[k]), int(df[k]), pooled, p_max(float(t[k]), m, int(df[k])))


def p_given_each(y: list[float], rounds: Rounds) -> list[float]:
    """p_given of the split at each place k of y (the right side starts at k, 1 to
    len(y) - 1), from one array of every split's t; 1 where a side is shorter than
    MIN_SIDE."""
    import numpy as np
    from scipy.stats import t as student

    if len(y) < 2 * MIN_SIDE:
        return [1.0] * max(0, len(y) - 1)
    arr = np.asarray(y, dtype=float)
    t, df, _ = _t_all(arr - arr.mean(), rounds)
    return [float(p) for p in np.where(t > 0, 2 * student.sf(t, df), 1.0)]


def split_at(y: list[float], at: int, rounds: Rounds) -> Split:
    """The split of y at `at` (a change point kept so far), with the p of the best split of a
    stretch this long: it was chosen as the best once."""
    import numpy as np

    if min(at, len(y) - at) < MIN_SIDE:  # two candidates a run apart: no level between them
        return Split(at, 0.0, 0, False, 1.0)
    arr = np.asarray(y, dtype=float)
    t, df, pooled = _t_all(arr - arr.mean(), rounds)
    return Split(at, float(t[at - 1]), int(df[at - 1]), pooled,
                 p_max(float(t[at - 1]), len(y), int(df[at - 1])))


def p_given(t: float, df: int) -> float:
    """The two-sided p of a split whose place was given beforehand (a recorded change), not
    chosen as the best: Student's t alone."""
    if df <= 0:
        return 1.0
    from scipy.stats import t as student

    return float(2 * student.sf(t, df)) if math.isfinite(t) else 0.0


def tail(null: Any, x: float) -> float:
    """The share of a sorted simulated null at or above x, one added to each side: the p of x,
    never 0 (its smallest is 1 / (len(null) + 1))."""
    import numpy as np

    return float((1 + len(null) - np.searchsorted(null, x)) / (len(null) + 1))


def p_max(t: float, m: int, df: int) -> float:
    """P(the largest split t of m runs of pure noise ≥ t), with df degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    if t <= 0:  # no difference at all (runs that read alike): every series reaches it
        return 1.0
    from scipy.stats import t as student

    # Bonferroni over the places is an upper bound too, and the only one beyond the
    # simulation's reach (its smallest p is 1 / (NULL_DRAWS + 1))
    bound = min(1.0, float(2 * student.sf(t, df)) * (m - 2 * MIN_SIDE + 1))
    if m > EXACT_UP_TO:
        return min(bound, _siegmund(_z_of(t, df), m))
    # between runs only: the exact maximum t; pooled: the maximum of the standardised
    # statistic (the variance then nearly known), the t turned into its normal value
    null, x = (_null(m, True), t) if df == m - 2 else (_null(m, False), _z_of(t, df))
    return min(bound, tail(null, x))


def smallest_step(m: int, sigma: float, alpha: float, given: bool = False) -> float | None:
    """The least step in the middle of m runs of noise sigma (log units) whose t reaches the
    test's bar: at it, noise takes the t above the bar or below it about equally, so such a step
    is found about half the time, and a larger one more often. The bar is the maximum t's at
    alpha over every place the split could be, or Student's t at alpha where the place was
    given (a recorded change). In log units; None below two levels of MIN_SIDE runs, or with
    sigma not above 0. On the runs' own spread (m − 2 degrees of freedom): rounds that agree
    with it can only lower the bar."""
    if m < 2 * MIN_SIDE or not sigma > 0:
        return None
    a = m // 2
    return _bar(m, alpha, given) * sigma * math.sqrt(1 / a + 1 / (m - a))


@functools.cache
def _bar(m: int, alpha: float, given: bool) -> float:
    """The t a split of m runs must reach at alpha: Student's where its place was given, else
    the maximum t's (p_max, solved by bisection); the same for every series of m runs."""
    df = m - 2
    if given:
        from scipy.stats import t as student

        return float(student.isf(alpha / 2, df))
    low, high = 0.0, 1.0
    while p_max(high, m, df) > alpha:
        low, high = high, high * 2
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if p_max(mid, m, df) > alpha else (low, mid)
    return high


def _z_of(t: float, df: int) -> float:
    """The normal value with the tail of Student's t at df degrees of freedom."""
    from scipy.stats import norm
    from scipy.stats import t as student

    return float(norm.isf(student.sf(t, df))) if df < 10_000 else t


@functools.cache
def _null(m: int, studentised: bool) -> Any:
    """The sorted largest split statistic of NULL_DRAWS series of m standard normal values:
    the t with the series' own variance, or the z with the true one."""
    import numpy as np

    rng = np.random.default_rng(m)
    out = []
    for _ in range(4):
        x = rng.standard_normal((NULL_DRAWS // 4, m))
        x -= x.mean(axis=1, keepdims=True)
        diff, ss, scale, valid = _splits(x)
        var = np.maximum(ss / (m - 2), 1e-300) if studentised else 1.0
        out.append((np.abs(diff) / np.sqrt(var * scale))[:, valid].max(axis=1))
    return np.sort(np.concatenate(out))


def _siegmund(z: float, m: int) -> float:
    """Siegmund's approximation of P(max standardised split statistic ≥ z) over m runs, two
    sided, with his discreteness correction ν."""
    from statistics import NormalDist

    from scipy.integrate import quad

    # the integrand runs some 1,700 times a series: the standard library's closed form, where
    # scipy.stats' scalar call costs a hundred times as much
    norm = NormalDist()
    if not math.isfinite(z) or z > 30:  # beyond any float's tail: nothing of noise reaches it
        return 0.0
    if z <= 0:
        return 1.0

    def nu(x: float) -> float:
        h = x / 2
        return (2 / x) * (norm.cdf(h) - 0.5) / (h * norm.cdf(h) + norm.pdf(h))

    lo, hi = MIN_SIDE / m, 1 - MIN_SIDE / m
    area = quad(lambda u: nu(z / math.sqrt(m * u * (1 - u))) / (u * (1 - u)), lo, hi,
                limit=200)[0]
    return float(min(1.0, z * norm.pdf(z) * area))
