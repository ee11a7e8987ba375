"""The odd ones of a group: each value against the rest of its group, and the outlier rule.
Pure functions, no I/O.

A healthy fleet must pass: the chance that any healthy node (or GPU) of any measurement is
called low is held at `alpha` (DEFAULT_ALPHA, 1%), so that a 1,000-node fleet does not page
someone every night. Three things make that hold without losing a slow node:
- The rule: Rosner's generalized ESD (Technometrics 25, 1983). The value farthest from the
  mean of the rest is taken out and held against the others, their mean and standard
  deviation, as a new value is in Student's prediction interval; then the next, up to a fifth
  of the group; the outliers are those taken out up to the last that passed its bar. So a
  second slow node cannot hide the first: it is out of the spread when the first is judged,
  or, judged first itself, it counts once the first passes. A value held against the others
  this way follows Student's t exactly on normal values, and a slow node's own value never
  widens the spread it is held against. The screen this replaced (the values within 3.5
  robust deviations of the median) kept two nodes 13% slow in the spread whenever the MAD of
  32 nodes came out large: on 4,000 seeded groups of 32 at 3%, it found each of two 15% slow
  nodes in 73% and one alone in 80%, where this rule finds 80% and 86%. When the nodes
  scatter no more than the rounds of their own runs say they should (the F-test of
  max_t.py's pooling, at 0.25), the rounds' variance joins in with its degrees of freedom.
- The bar: Student's t at `alpha` / the number of tests (Bonferroni), one-sided (a fast node
  fails nothing), at the spread's degrees of freedom, times the spread and √(1 + 1/m) for the
  m values it is held against; never under TINY_PCT of their mean (a 0.5% difference in a
  group that agrees to 0.1% is no fault worth a page). The rule's steps beyond the first call
  a normal value low more often than the first step's bar says, each later value being held
  against others whose extremes were taken out: in groups of 12 at n × p 0.01, 1.32 times as
  often, of 32 at 0.003, 1.06 times, of 128 at 0.01, 1.01 times; so each step is held at p /
  that (esd_p, measured by scripts/esd_null.py). A GPU is held against its node's
  median with the spread of every node's GPUs about theirs (`spread`), measured over so many
  GPUs that its own mean needs no allowance.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.analysis import max_t

DEFAULT_ALPHA = 0.01
SCREEN = 3.5  # robust deviations: GPU deviations beyond stay out of their spread
TINY_PCT = 5.0
MIN_GROUP = 3  # fewer values have no median worth holding one of them against
# Rosner's steps beyond the first call a normal group's value low more often than the first
# step's n × p: each later value is judged against others whose most extreme were taken out.
# The surplus, as a share of n × p, by group size (a fifth of it are steps) and n × p (columns
# below), measured on 1,000,000 normal groups a cell by scripts/esd_null.py (300,000 at 256);
# fleet holds each step at p / (1 + it) (esd_p), and a normal group's low calls then read
# n × p within the draws' error (--check). 0 where one step is all (n < 10) and over 256.
ESD_NP = (0.001, 0.003, 0.01)
ESD_SURPLUS: dict[int, tuple[float, ...]] = {
    10: (0.344, 0.368, 0.405), 12: (0.235, 0.286, 0.321), 16: (0.179, 0.225, 0.319),
    20: (0.114, 0.156, 0.241), 24: (0.065, 0.116, 0.159), 32: (0.038, 0.058, 0.096),
    40: (0.018, 0.035, 0.072), 48: (0.016, 0.03, 0.054), 64: (0.013, 0.019, 0.037),
    96: (0.006, 0.012, 0.022), 128: (0.005, 0.009, 0.014), 256: (0.003, 0.002, 0.013)}
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
    center: float  # the mean of the values that are no outliers (the median, with `spread`)
    sigma: float  # the spread (see the module's docstring), in the values' unit
    bar: float  # how far from the center a value not yet seen would be an outlier
    scores: list[Score]
    df: int = 0  # the spread's degrees of freedom
    pooled: bool = False  # the rounds' noise joined the spread
    tests: float = 1.0  # what the bar was paid for

    @property
    def sigma_pct(self) -> float:
        return self.sigma / abs(self.median) * 100 if self.median else 0.0

    @property
    def bar_pct(self) -> float:
        """The smallest deviation this group's spread lets it see, in percent of its center."""
        return self.bar / abs(self.center) * 100 if self.center else 0.0


def relative_spread(deviations: Sequence[float]) -> tuple[float, int]:
    """(σ, df) of relative deviations from their own medians (each GPU from its node's): the
    standard deviation of those within SCREEN robust deviations (1.4826 · MAD) of none, so
    that a bad GPU does not widen it, corrected for the cut (the values kept are a normal's
    within ±c of its centre, whose variance is short of the whole's). A fleet's GPUs are many
    enough for their MAD to be steady, which a group of 32 nodes' is not (see `score`)."""
    from scipy.stats import median_abs_deviation

    mad = float(median_abs_deviation(list(deviations), scale="normal"))
    kept = [v for v in deviations if abs(v) <= SCREEN * mad] if mad > 0 else list(deviations)
    if len(kept) < MIN_GROUP or mad == 0:
        return mad, max(1, len(deviations) - 1)
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
    GPUs), which holds each value against the median with that spread instead."""
    if len(values) < MIN_GROUP:
        raise ValueError(f"{len(values)} value(s): a group needs at least {MIN_GROUP}")
    from scipy.stats import t

    med = float(statistics.median(values))
    p = alpha / max(tests, 1.0)
    if spread is not None:
        (sigma, df), center, pooled = spread, med, False
        bar = max(float(t.isf(p, df)) * sigma, TINY_PCT / 100 * abs(med))
        odd = {i for i, v in enumerate(values) if abs(v - med) > bar}
    else:
        p = esd_p(p, len(values))
        odd = _esd(values, p, rounds)
        clean = [v for i, v in enumerate(values) if i not in odd]
        center = statistics.fmean(clean)
        sigma, df, pooled = _pooled_sd(clean, rounds)
        # a value the rule has not seen, against all the clean ones: Student's prediction
        crit = float(t.isf(p, df)) * math.sqrt(1 + 1 / len(clean))
        bar = max(crit * sigma, TINY_PCT / 100 * abs(center))
    sign = 1 if higher_is_better else -1
    out = []
    for i, v in enumerate(values):
        z = (v - center) / sigma if sigma > 0 else None
        dev = sign * (v - med) / abs(med) * 100 if med else 0.0
        out.append(Score(float(v), None if z is None else sign * z, dev, i in odd))
    return Group(med, center, sigma, bar, out, df, pooled, tests)


def esd_p(p: float, n: int) -> float:
    """The one-sided p at which _esd calls a low value of a normal group of `n` with the
    chance n × `p` (ESD_SURPLUS, interpolated in log n and log n × p, held at its edges)."""
    import numpy as np

    sizes = sorted(ESD_SURPLUS)
    if n // 5 < 2 or n > sizes[-1]:
        return p
    at = math.log(n * p)
    rows = [np.interp(at, np.log(ESD_NP), ESD_SURPLUS[size]) for size in sizes]
    surplus = float(np.interp(math.log(n), np.log(sizes), rows))
    return p / (1 + max(surplus, 0.0))


def _pooled_sd(values: Any, rounds: tuple[float, int] | None) -> tuple[float, int, bool]:
    """(σ, df, pooled) of `values`, the rounds' noise joined where the values agree with it."""
    import numpy as np

    var, df = float(np.var(values, ddof=1)), len(values) - 1
    pooled = False
    if rounds:
        var, df, pooled = max_t.pooled(var, df, *rounds)
    return math.sqrt(var), df, pooled


def _esd(values: Sequence[float], p: float, rounds: tuple[float, int] | None) -> set[int]:
    """The outliers by Rosner's generalized ESD (Technometrics 25, 1983): take out, one at a
    time and up to a fifth of the group, the value farthest from the mean of those left, each
    held against the others left (mean and σ, the rounds' noise joined where they agree) by
    Student's t at the one-sided `p` for a new value; the outliers are those taken out up to
    the last one that passed (and lies beyond TINY_PCT of the others' mean), so that a second
    slow value cannot hide the first (a step it masked still counts once a later one passes)."""
    import numpy as np
    from scipy.stats import t

    x = np.asarray(values, dtype=float)
    left = np.ones(len(x), dtype=bool)
    order: list[int] = []
    near: set[int] = set()  # taken out, but within TINY_PCT of the others: never an outlier
    ts: list[float] = []  # each step's |t| (inf: the others have no spread)
    dfs: list[int] = []
    for _ in range(max(1, len(x) // 5)):
        if left.sum() < MIN_GROUP:
            break
        idx = np.flatnonzero(left)
        k = int(idx[np.argmax(np.abs(x[idx] - x[idx].mean()))])
        left[k] = False
        order.append(k)
        others = x[left]
        sigma, df, _ = _pooled_sd(others, rounds)
        mean = float(others.mean())
        far = abs(x[k] - mean)
        if far <= TINY_PCT / 100 * abs(mean):
            near.add(k)
        ts.append(far / (sigma * math.sqrt(1 + 1 / len(others))) if sigma > 0 else math.inf)
        dfs.append(df)
    crit = t.isf(p, np.asarray(dfs)) if dfs else np.zeros(0)  # one call: scipy's is slow
    beyond = [i for i, k in enumerate(order) if k not in near and ts[i] > crit[i]]
    passed = beyond[-1] + 1 if beyond else 0
    return set(order[:passed]) - near


def combined(columns: Sequence[Mapping[Any, float]], higher_is_better: Sequence[bool]
             ) -> tuple[dict[Any, float], list[int]]:
    """Each entity's measurements as one index, as history's combined series takes a run's
    (compare/history_series.index_points): 1 + the weighted mean of its values' relative
    deviations from each measurement's median, oriented so that higher is better, each weighted
    by the inverse of its variance over the entities: that of the entities the outlier rule
    keeps (_esd at alpha over them), so that a slow node does not lower its own measurement's
    weight. Deviations and a standard deviation, as each measurement is itself judged: an index
    of logs weighted by their MAD flagged healthy nodes low 1.6 times as often as its share of
    alpha (0.41% of 40,000 normal fleets of 32 nodes at a bar one figure alone passed in
    0.27%). The log of a normal value has a longer low tail, and a weight from the MAD is large
    where the middle of a measurement happens to be narrow, not its tails; weighted by the kept
    nodes' variance the index passed that bar in 0.32%, one figure 0.34%. A node slow in
    measurements whose noise is their own moves the
    index by all of its slowness while the index's noise falls as the measurements add up: a
    node 15% slow in three measurements of 3% independent spread stands about 9σ out of the
    index where it stands 5σ out of each (scripts/fleet_bench.py --headline). Only entities
    that every measurement has, and only measurements with a spread (copies of one run read
    one value, to which no weight can be given). Returns (the index by entity, the columns it
    took); ({}, []) with fewer than two such measurements or MIN_GROUP entities."""
    common = sorted(set.intersection(*(set(c) for c in columns)) if columns else set(), key=str)
    if len(common) < MIN_GROUP:
        return {}, []
    parts, used = [], []
    for j, (col, up) in enumerate(zip(columns, higher_is_better, strict=True)):
        mid = statistics.median(col[e] for e in common)
        if mid <= 0:
            continue
        rel = {e: (col[e] / mid - 1) * (1 if up else -1) for e in common}
        odd = _esd([col[e] for e in common], DEFAULT_ALPHA / len(common), None)
        clean = [rel[e] for i, e in enumerate(common) if i not in odd]
        sd = statistics.stdev(clean) if len(clean) > 1 else 0.0
        if sd > 0:
            parts.append((1 / sd**2, rel))
            used.append(j)
    if len(parts) < 2:
        return {}, []
    total = sum(w for w, _ in parts)
    return {e: 1 + sum(w * d[e] for w, d in parts) / total for e in common}, used


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
    # a column where half the nodes or more read one value (copies of one run) is left out:
    # where the nodes that are no outliers all read it, score has no spread and holds them to
    # TINY_PCT's floor alone, no test at alpha (where the rest still spread, score does test
    # at alpha and this count misses it; fleet refuses copies of one machine unless told)
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
