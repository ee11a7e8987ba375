"""The odd ones of a group: each value against the group's median, and the outlier rule.
Pure functions, no I/O.

A healthy fleet must pass: the chance that any healthy node (or GPU) of any measurement is
called low is held at `alpha` (DEFAULT_ALPHA, 1%), so that a 1,000-node fleet does not page
someone every night. Three things make that hold without losing a slow node:
- The spread: the standard deviation of the values within 3.5 robust deviations (1.4826 ·
  MAD) of the median, so that the outliers do not inflate it and the rest count fully (a MAD
  alone has the efficiency of a third as many values: from 32 nodes it misjudged the spread
  by ±20%, and 4 fleets in 20 showed a false outlier). When the nodes scatter no more than the
  rounds of their own runs say they should (the F-test of max_t.py's pooling, at 0.25), the
  rounds' variance joins in with its degrees of freedom.
- The bar: Student's t at `alpha` / the number of tests (Bonferroni), one-sided (a fast node
  fails nothing), at the spread's degrees of freedom, times the spread; never under TINY_PCT of
  the median (a 0.5% difference in a group that agrees to 0.1% is no fault worth a page).
- The number of tests: nodes × the effective number of independent measurements (Li and Ji,
  "Adjusting multiple testing in multilocus analyses using the eigenvalues of a correlation
  matrix", Heredity 95, 2005), from how the measurements vary together across the nodes: a
  slow node is slow in its matmul and its ResNet50 alike, and counting them as two tests would
  halve the chance of seeing it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from benchbench.analysis import max_t

DEFAULT_ALPHA = 0.01
SCREEN = 3.5  # robust deviations: values beyond stay out of the spread
TINY_PCT = 5.0
MIN_GROUP = 3  # fewer values have no median worth holding one of them against


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
    return statistics.stdev(kept), len(kept) - 1


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
    bar = max(crit * sigma, TINY_PCT / 100 * abs(med))
    sign = 1 if higher_is_better else -1
    out = []
    for v in values:
        z = (v - med) / sigma if sigma > 0 else None
        dev = sign * (v - med) / abs(med) * 100 if med else 0.0
        out.append(Score(float(v), None if z is None else sign * z, dev, abs(v - med) > bar))
    return Group(med, sigma, bar, out, df, pooled, tests)


def effective_tests(table: Sequence[Sequence[float]]) -> float:
    """Li and Ji's effective number of independent measurements: `table` holds one row per
    node, one column per measurement (the nodes that have all of them); 1 to the columns."""
    columns = len(table[0]) if table else 0
    if columns < 2 or len(table) < 3:
        return float(max(columns, 1))
    import numpy as np

    raw = np.asarray(table, dtype=float)
    if not (raw > 0).all():  # no logarithm to take: count every measurement
        return float(columns)
    x = np.log(raw)
    sd = x.std(axis=0)
    if (sd == 0).any():
        return float(columns)
    eig = np.linalg.eigvalsh(np.corrcoef(x, rowvar=False))
    eig = np.abs(eig)
    return float(max(1.0, sum((e >= 1) + (e - math.floor(e)) for e in eig)))
