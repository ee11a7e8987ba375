"""Statistics derived from raw samples: median, spread, coefficient of variation, intervals.

Everything here is recomputable from the samples stored in results.json. scipy is imported
lazily, inside the one function that needs it, so that importing this module stays cheap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# A benchmark whose samples vary more than this (stdev / mean) is flagged in the report.
# pyperf warns at 10%; training-throughput comparisons need tighter, so we flag at 5%.
UNSTABLE_CV = 0.05
# Fewer samples than this have no spread worth a name (an IQR of two values is their range,
# a CV of two a guess): a report gives the values themselves.
MIN_SPREAD_SAMPLES = 3


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float
    cv: float
    minimum: float
    maximum: float
    q1: float
    q3: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def unstable(self) -> bool:
        return self.cv > UNSTABLE_CV


def _check(samples: Sequence[float]) -> list[float]:
    values = [float(s) for s in samples]
    if not values:
        raise ValueError("no samples")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("samples must be finite")
    return values


def median(samples: Sequence[float]) -> float:
    return statistics.median(_check(samples))


def cv(samples: Sequence[float]) -> float:
    """Coefficient of variation (sample stdev / mean); 0 for fewer than two samples."""
    values = _check(samples)
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) if mean else math.inf


def quantile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method), q in [0, 1]."""
    values = sorted(_check(samples))
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must lie in [0, 1]")
    pos = q * (len(values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> Summary:
    values = _check(samples)
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(
        n=len(values),
        median=statistics.median(values),
        mean=mean,
        stdev=stdev,
        cv=cv(values),
        minimum=min(values),
        maximum=max(values),
        q1=quantile(values, 0.25),
        q3=quantile(values, 0.75),
    )


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval for the median, from binomial order statistics.

    With too few samples to reach the confidence, the interval is the full sample range.
    """
    from scipy.stats import binom

    values = sorted(_check(samples))
    n = len(values)
    alpha = 1.0 - confidence
    # Largest k with P(X < k) <= alpha/2 for X ~ Binomial(n, 1/2); the interval is
    # [x_(k), x_(n-k+1)] in 1-based order statistics.
    k = int(binom.ppf(alpha / 2, n, 0.5))
    if k < 1 or binom.cdf(k - 1, n, 0.5) > alpha / 2:
        k = max(k - 1, 0)
    if k < 1:
        return values[0], values[-1]
    return values[k - 1], values[n - k]


def spread(values: Sequence[float]) -> float:
    """Relative spread (max - min) / max, e.g. between GPUs of one node."""
    vals = _check(values)
    top = max(vals)
    return (top - min(vals)) / top if top else 0.0


def rel_spread(samples: Sequence[float]) -> float | None:
    """Samples' spread as a share of their median: the interquartile range over 1.349 (a
    normal distribution's standard deviation, robust to one odd sample); None under three
    samples."""
    if len(samples) < 3:
        return None
    s = summarize(samples)
    return s.iqr / 1.349 / s.median if s.median > 0 else None
