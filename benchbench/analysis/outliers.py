"""The odd ones of a group: a robust z against the group's median, and the outlier rule.
Pure functions, no I/O.

z = (x − median) / (1.4826 · MAD), scipy's median_abs_deviation with scale="normal": the
median and the MAD ignore the outliers they are meant to find, where a mean and a standard
deviation would be dragged towards them. A value is an outlier beyond |z| > Z_LIMIT (3.5,
Iglewicz and Hoaglin's cut-off for the modified z-score), or, when the group is so tight that
3.5 of its robust deviations are less than TINY_PCT of the median, beyond TINY_PCT from the
median: a 0.5% difference in a group that agrees to 0.1% is no fault worth a page.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Z_LIMIT = 3.5
TINY_PCT = 5.0
MIN_GROUP = 3  # fewer values have no median worth holding one of them against


@dataclass(frozen=True)
class Score:
    value: float
    z: float | None  # oriented, − is worse; None when the group's MAD is 0
    deviation_pct: float  # signed against the median, + is better whichever way it points
    outlier: bool

    @property
    def low(self) -> bool:
        """An outlier on the worse side: the one that fails the fleet."""
        return self.outlier and self.deviation_pct < 0


@dataclass(frozen=True)
class Group:
    median: float
    sigma: float  # 1.4826 · MAD: the group's robust standard deviation
    bar: float  # how far from the median a value is an outlier: max(3.5 σ, 5% of the median)
    scores: list[Score]

    @property
    def sigma_pct(self) -> float:
        return self.sigma / abs(self.median) * 100 if self.median else 0.0


def score(values: Sequence[float], higher_is_better: bool = True) -> Group:
    """Each value's robust z and outlier call against the others (at least MIN_GROUP)."""
    if len(values) < MIN_GROUP:
        raise ValueError(f"{len(values)} value(s): a group needs at least {MIN_GROUP}")
    from scipy.stats import median_abs_deviation

    med = float(statistics.median(values))
    sigma = float(median_abs_deviation(list(values), scale="normal"))
    bar = max(Z_LIMIT * sigma, TINY_PCT / 100 * abs(med))
    sign = 1 if higher_is_better else -1
    out = []
    for v in values:
        z = (v - med) / sigma if sigma > 0 else None
        dev = sign * (v - med) / abs(med) * 100 if med else 0.0
        out.append(Score(float(v), None if z is None else sign * z, dev, abs(v - med) > bar))
    return Group(med, sigma, bar, out)
