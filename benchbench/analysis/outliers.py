"""The odd ones of a group: each value against the group's median, and the outlier rule.
Pure functions, no I/O.

A healthy fleet must pass: the chance that any healthy node (or GPU) of any measurement is
called low is held at `alpha` (DEFAULT_ALPHA, 1%), so that a 1,000-node fleet does not page
someone every night. Three things make that hold without losing a slow node:
- The spread: the standard deviation of the values within 3.5 robust deviations (1.4826 ·
  MAD) of the median, so that the outliers do not inflate it and the rest count fully (a MAD
  alone has the efficiency of a third as many values: from 32 nodes it misjudged the spread
  by ±20%, and 4 fleets in 20 showed a false outlier), corrected for the cut: the values kept
  are a normal's within ±c of its centre, whose variance is short of the whole's. When the
  nodes scatter no more than the rounds of their own runs say they should (the F-test of
  max_t.py's pooling, at 0.25), the rounds' variance joins in with its degrees of freedom.
- The bar: Student's t at `alpha` / the number of tests (Bonferroni), one-sided (a fast node
  fails nothing), at the spread's degrees of freedom, times the spread; never under TINY_PCT of
  the median (a 0.5% difference in a group that agrees to 0.1% is no fault worth a page).
  The t is widened by √((1 + π/(2n)) (1 + 1/df)), because the value is held against estimates:
  the median of n values varies by π σ²/(2n) about the centre, and a value the screen leaves
  out stands outside the spread it is judged by, as a new value does in Student's prediction
  interval. Without it, 32 normal values at 3e-4 to 2e-5 a test showed a low value 1.3–1.8
  times as often as alpha said (1.1–1.2 times at 256): the statistic's tail is heavier than t's.
- The number of tests: nodes × the effective number of independent measurements, from how
  the measurements vary together across the nodes: a slow node is slow in its matmul and its
  ResNet50 alike, and counting them as two tests would halve the chance of seeing it. The count
  is taken at the bar's own tail (effective_tests), where correlated measurements act nearly
  as separate tests: four at a correlation of 0.8 make 3.1 tests at a one-sided p of 1.6e-4.
  Li and Ji's count from the correlation matrix's eigenvalues (Heredity 95, 2005), built for
  tails near 0.05, said 2.0, and healthy 32-node fleets of four such measurements failed in
  10 of 400 (scripts/fleet_bench.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.analysis import max_t

DEFAULT_ALPHA = 0.01
SCREEN = 3.5  # robust deviations: values beyond stay out of the spread
TINY_PCT = 5.0
MIN_GROUP = 3  # fewer values have no median worth holding one of them against
_NORMAL = statistics.NormalDist()


@dataclass(frozen=True)
class Score:
    value: float
    z: float | None  # oriented, − is worse; None when the group has no spread
    deviation_pct: float  # signed against the median, + is better whichever way it points
    outlier: bool

    @property
    def low(self) -> bool:
        """An outlier on the worse side: the one that fails the fleet."""
        return self.outlier and self.deviation_pct < 0


@dataclass(frozen=True)
class Group:
    median: float
    sigma: float  # the spread (see the module's docstring), in the values' unit
    bar: float  # how far from the median a value is an outlier
    scores: list[Score]
    df: int = 0  # the spread's degrees of freedom
    pooled: bool = False  # the rounds' noise joined the spread
    tests: float = 1.0  # what the bar was paid for

    @property
    def sigma_pct(self) -> float:
        return self.sigma / abs(self.median) * 100 if self.median else 0.0

    @property
    def bar_pct(self) -> float:
        """The smallest deviation this group's spread lets it see, in percent of its median."""
        return self.bar / abs(self.median) * 100 if self.median else 0.0


def relative_spread(deviations: Sequence[float]) -> tuple[float, int]:
    """(σ, df) of relative deviations from their own medians (each GPU from its node's)."""
    return _spread(deviations, 0.0)


def _spread(values: Sequence[float], med: float) -> tuple[float, int]:
    from scipy.stats import median_abs_deviation

    mad = float(median_abs_deviation(list(values), scale="normal"))
    kept = [v for v in values if abs(v - med) <= SCREEN * mad] if mad > 0 else list(values)
    if len(kept) < MIN_GROUP or mad == 0:
        return mad, max(1, len(values) - 1)
    sd = statistics.stdev(kept)
    # the values kept are a normal's cut at the screen, ±c of their own spread: their variance
    # is 1 − 2cφ(c)/(2Φ(c) − 1) of the whole's
    c = SCREEN * mad / sd
    cut = 1 - 2 * c * _NORMAL.pdf(c) / (2 * _NORMAL.cdf(c) - 1)
    return sd / math.sqrt(cut) if cut > 0 else sd, len(kept) - 1


def score(values: Sequence[float], higher_is_better: bool = True, tests: float = 1.0,
          alpha: float = DEFAULT_ALPHA, rounds: tuple[float, int] | None = None,
          spread: tuple[float, int] | None = None) -> Group:
    """Each value's z and outlier call against the others (at least MIN_GROUP). `tests`: how
    many such calls the fleet makes in all; `rounds`: (the variance of one value that the
    rounds of its run say, in the values' unit squared; its degrees of freedom); `spread`:
    (σ, df) measured elsewhere (a GPU against its node's, with the spread of every node's
    GPUs)."""
    if len(values) < MIN_GROUP:
        raise ValueError(f"{len(values)} value(s): a group needs at least {MIN_GROUP}")
    from scipy.stats import t

    med = float(statistics.median(values))
    sigma, df = spread or _spread(values, med)
    pooled = False
    if rounds:
        var, df, pooled = max_t.pooled(sigma**2, df, *rounds)
        sigma = math.sqrt(var) if pooled else sigma
    crit = float(t.isf(alpha / max(tests, 1.0), df))
    if spread is None:
        crit *= math.sqrt((1 + math.pi / (2 * len(values))) * (1 + 1 / df))
    bar = max(crit * sigma, TINY_PCT / 100 * abs(med))
    sign = 1 if higher_is_better else -1
    out = []
    for v in values:
        z = (v - med) / sigma if sigma > 0 else None
        dev = sign * (v - med) / abs(med) * 100 if med else 0.0
        out.append(Score(float(v), None if z is None else sign * z, dev, abs(v - med) > bar))
    return Group(med, sigma, bar, out, df, pooled, tests)


def effective_tests(table: Sequence[Sequence[float]], level: float) -> float:
    """How many independent tests the measurements make at a bar that one normal value passes
    with the one-sided chance `level`: P(any passes its bar) / `level`, 1 to the columns.
    `table` holds one row per node, one column per measurement, each oriented so that lower is
    worse; a column with no spread (its median absolute deviation 0) is left out. The
    correlation is Spearman's, as a normal copula's (2 sin(π r / 6)), so a slow
    node does not make its measurements look alike. P(any) is bounded from above by Hunter
    and Worsley: Bonferroni less the joint tails of the pairs along the tree of the strongest
    correlations (Hunter, J. Appl. Prob. 13, 1976), tight where the tail is this far out."""
    columns = len(table[0]) if table else 0
    if columns < 2 or len(table) < 3:
        return float(max(columns, 1))
    import numpy as np
    from scipy.stats import median_abs_deviation, spearmanr

    raw = np.asarray(table, dtype=float)
    # a column where half the nodes or more read one value has no spread to set a bar at
    # alpha (score falls back to TINY_PCT's floor): it makes no test of this kind
    raw = raw[:, median_abs_deviation(raw, axis=0) > 0]
    columns = raw.shape[1]
    if columns < 2:
        return 1.0
    r = spearmanr(raw).statistic  # a number for two columns, a matrix for more
    r = np.array([[1.0, r], [r, 1.0]]) if np.ndim(r) == 0 else r
    rho = 2 * np.sin(np.pi * np.nan_to_num(r) / 6)
    bar = _NORMAL.inv_cdf(1 - level)
    joint = sum(_joint_tail(bar, float(rho[i, j])) for i, j in _strongest_tree(rho))
    return float(min(columns, max(1.0, columns - joint / level)))



def paid_tests(parts: Sequence[tuple[int, Sequence[Sequence[float]], int]], alpha: float
               ) -> float:
    """The tests a fleet pays `alpha` for: over `parts` (how many entities, their table as
    effective_tests takes it, how many measurements), the entities times the effective number
    of measurements at the bar the total gives. The bar's tail depends on the count, so the
    count starts at Bonferroni's and is taken again at the bar it gives, three times (in the
    tests' 32-node fleet the third moved it by 0.02%). At least 1."""
    total = float(sum(n * columns for n, _, columns in parts))
    for _ in range(3):
        level = alpha / max(total, 1.0)
        total = sum(n * (effective_tests(table, level) if table else float(columns))
                    for n, table, columns in parts)
    return max(total, 1.0)


def _joint_tail(bar: float, rho: float) -> float:
    """P(X > bar and Y > bar) for standard normal X, Y of correlation rho."""
    if rho >= 1 - 1e-12:
        return 1 - _NORMAL.cdf(bar)
    if rho <= -1 + 1e-12:  # one past a positive bar puts the other below it
        return 0.0
    from scipy.integrate import quad

    s = math.sqrt(1 - rho * rho)
    got, _ = quad(lambda x: _NORMAL.pdf(x) * (1 - _NORMAL.cdf((bar - rho * x) / s)),
                  bar, bar + 12)
    return float(got)


def _strongest_tree(rho: Any) -> list[tuple[int, int]]:
    """The edges of the spanning tree of the largest correlations (Prim's)."""
    n = len(rho)
    inside, edges = {0}, []
    while len(inside) < n:
        i, j = max(((a, b) for a in inside for b in range(n) if b not in inside),
                   key=lambda e: rho[e[0]][e[1]])
        inside.add(j)
        edges.append((i, j))
    return edges
