import math

import pytest

from benchbench.core import stats


def test_median_and_quantiles():
    s = stats.summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s.median == 3.0
    assert (s.q1, s.q3) == (2.0, 4.0)
    assert s.minimum == 1.0 and s.maximum == 5.0
    assert s.n == 5


def test_cv_and_unstable_flag():
    assert stats.cv([10.0]) == 0.0
    assert stats.cv([10.0, 10.0, 10.0]) == 0.0
    steady = stats.summarize([100.0, 101.0, 99.0, 100.0])
    noisy = stats.summarize([100.0, 130.0, 70.0, 100.0])
    assert not steady.unstable
    assert noisy.unstable
    assert noisy.cv == pytest.approx(math.sqrt(600) / 100)


def test_rejects_empty_and_non_finite():
    with pytest.raises(ValueError):
        stats.median([])
    with pytest.raises(ValueError):
        stats.cv([1.0, float("nan")])


def test_median_ci_contains_median_and_narrows_with_n():
    small = stats.median_ci([1, 2, 3])
    assert small == (1, 3)  # too few samples: the full range
    values = list(range(1, 101))
    lo, hi = stats.median_ci(values, 0.95)
    assert lo < stats.median(values) < hi
    # For n=100 the 95% order-statistic interval is about ranks 40..61.
    assert 38 <= lo <= 42 and 59 <= hi <= 63


def test_spread():
    assert stats.spread([100.0, 95.0, 99.0]) == pytest.approx(0.05)
