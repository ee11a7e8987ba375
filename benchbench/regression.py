"""The regression decision for one measurement: baseline samples against candidate samples.

Pure functions, no I/O. asv's rule: a change is a regression only when it is statistically
significant *and* larger than a threshold, here a percentage in the direction of
higher_is_better. Significance is Mann-Whitney U (two-sided) on the raw samples when the
sample counts can reach alpha at all, else non-overlapping (1 - alpha) confidence intervals of
the medians. scipy is imported inside the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchbench import stats

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_ALPHA = 0.01
# pyperf's "unstable" mark: a standard deviation of 10% of the mean or more. Past it, day-to-day
# noise can pass for a change (or hide one), so the metric is not decided either way.
NOISY_CV = 0.10
# Fewer samples than this on a side cannot decide anything: the confidence interval of the
# median degenerates to the sample range, and two samples fall on either side of each other by
# chance one time in three.
MIN_SAMPLES = 3

REGRESSED = "regressed"
IMPROVED = "improved"
WITHIN = "within threshold"
NO_CHANGE = "no significant change"
INCONCLUSIVE = "inconclusive"
NOT_TESTED = "not tested"
OUTCOMES = (REGRESSED, IMPROVED, WITHIN, NO_CHANGE, INCONCLUSIVE, NOT_TESTED)
# What to do about an inconclusive metric; the reports print it once above the list.
INCONCLUSIVE_ADVICE = ("re-run both sides with more repeats (`benchbench run --repeats 10`), "
                       "or pool several runs per side (`--baseline` repeated, or a quoted glob)")


@dataclass(frozen=True)
class Decision:
    """What one candidate/baseline pair of sample sets says."""

    outcome: str  # one of OUTCOMES
    ratio: float | None  # candidate / baseline medians, > 1 is better whatever the direction
    change_pct: float | None  # signed, + is better
    test: str | None  # "mann-whitney", "median-ci" or None when no test ran
    p_value: float | None = None
    reason: str = ""


def min_p_value(n: int, m: int) -> float:
    """The smallest two-sided p Mann-Whitney U can give with n and m samples: 2 / C(n+m, n),
    reached when every sample of one side lies below every sample of the other."""
    return min(1.0, 2.0 / math.comb(n + m, n))


def choose_test(n: int, m: int, alpha: float) -> str:
    """'mann-whitney' when the sample counts can reach alpha, else 'median-ci'."""
    return "mann-whitney" if min_p_value(n, m) <= alpha else "median-ci"


def ratio(base: float, cand: float, higher_is_better: bool) -> float | None:
    """Candidate against baseline, oriented so that > 1 is better."""
    if higher_is_better:
        return cand / base if base > 0 else None
    return base / cand if cand > 0 else None


def change_pct(base: float, cand: float, higher_is_better: bool) -> float | None:
    """Signed percentage change of the candidate's median, + is better."""
    if base == 0:
        return None
    pct = (cand - base) / abs(base) * 100.0
    return pct if higher_is_better else -pct


def _significant(base: list[float], cand: list[float], alpha: float
                 ) -> tuple[bool, str, float | None]:
    test = choose_test(len(base), len(cand), alpha)
    if test == "mann-whitney":
        from scipy.stats import mannwhitneyu

        p = float(mannwhitneyu(base, cand, alternative="two-sided").pvalue)
        return p <= alpha, test, p
    lo_b, hi_b = stats.median_ci(base, 1.0 - alpha)
    lo_c, hi_c = stats.median_ci(cand, 1.0 - alpha)
    return hi_c < lo_b or hi_b < lo_c, test, None


def decide(base: Sequence[float], cand: Sequence[float], higher_is_better: bool, *,
           statistic: str = "median", threshold_pct: float = DEFAULT_THRESHOLD_PCT,
           alpha: float = DEFAULT_ALPHA, values: tuple[float, float] | None = None
           ) -> Decision:
    """Regressed when the difference is significant at alpha AND worse than threshold_pct;
    improved likewise in the other direction. Peaks over sizes (statistic 'max') are not
    tested: their samples are per-size medians, not repeats. `values` are the two figures the
    ratio compares (default: the samples' medians; a peak's is its value, not that median)."""
    b, c = [float(x) for x in base], [float(x) for x in cand]
    mb, mc = values if values is not None else (stats.median(b), stats.median(c))
    r, pct = ratio(mb, mc, higher_is_better), change_pct(mb, mc, higher_is_better)
    if statistic == "max":
        why = ("a peak over sizes: its per-size rows are tested instead"
               if max(len(b), len(c)) > 1 else "a single peak figure, not repeated samples")
        return Decision(NOT_TESTED, r, pct, None, reason=why)
    if min(b) == max(b) == min(c) == max(c):
        return Decision(NO_CHANGE, r, pct, None, reason="identical samples")
    if min(len(b), len(c)) < MIN_SAMPLES:
        return Decision(INCONCLUSIVE, r, pct, None,
                        reason=f"too few samples ({len(b)} vs {len(c)}, fewer than "
                               f"{MIN_SAMPLES} a side)")
    cv_b, cv_c = stats.cv(b), stats.cv(c)
    if max(cv_b, cv_c) > NOISY_CV:
        return Decision(INCONCLUSIVE, r, pct, None,
                        reason=f"too noisy to decide (CV {cv_b:.0%} vs {cv_c:.0%}, above "
                               f"{NOISY_CV:.0%})")
    significant, test, p = _significant(b, c, alpha)
    if not significant:
        return Decision(NO_CHANGE, r, pct, test, p)
    # asv's symmetric rule: worse or better by the same factor either way round, so that
    # swapping the two sides swaps regressed and improved.
    factor = 1 + threshold_pct / 100
    if r is not None and r < 1 / factor:
        return Decision(REGRESSED, r, pct, test, p)
    if r is not None and r > factor:
        return Decision(IMPROVED, r, pct, test, p)
    return Decision(WITHIN, r, pct, test, p,
                    reason=f"significant but within ±{threshold_pct:g}%")
