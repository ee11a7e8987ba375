"""The shape of a throughput over ~100 ms windows: its median, CV, worst 1%, drift and drops,
and the bars a steady one meets. Pure functions; values in any unit per second, ratios from 0
to 1."""

from __future__ import annotations

import math
import statistics
from typing import Any

MIN_WINDOWS = 10  # fewer cannot give a 1st percentile or a first/last 10%
# "stable": a spread well inside the 5% at which benchbench.stats flags a probe, no slow tail,
# and no trend across the run. The work per cycle of a 100 ms window keeps well under 2%: per
# GHz of their clocks the first three H200s' windows kept a CV of 1.9-2.7%, against their
# clock readings' own error of 2.0-2.9%, which leaves under 1% to the kernel. A GPU at its
# power limit moves its clock, and its windows further, so a spread over 2% is judged on the
# rate per GHz of the clock (analysis/stability_clock.py) before anyone is blamed.
STABLE_CV = 0.02
STABLE_WORST = 0.90
STABLE_DRIFT = 0.03
DROP = 0.90  # a window under this share of the median throughput is a drop


def clean(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    ok = [(float(t), float(v)) for t, v in windows
          if t is not None and v is not None and math.isfinite(t) and math.isfinite(v)]
    return sorted(ok)


def percentile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(windows: list[tuple[float, float]]) -> dict[str, Any]:
    """{"median": units/s, "cv": ratio, "worst_1pct_ratio": ratio, "drift": ratio,
    "drops": int, "n_windows": int}; a value that cannot be computed is None."""
    values = [v for _, v in clean(windows)]
    n = len(values)
    out: dict[str, Any] = {"median": None, "cv": None, "worst_1pct_ratio": None,
                           "drift": None, "drops": 0, "n_windows": n}
    if not n:
        return out
    med = statistics.median(values)
    mean = statistics.fmean(values)
    out["median"] = med
    if n < 2:
        out["cv"] = 0.0
    elif mean > 0:
        out["cv"] = statistics.stdev(values) / mean
    if med > 0:
        out["worst_1pct_ratio"] = percentile(sorted(values), 0.01) / med
        out["drops"] = sum(v < DROP * med for v in values)
    k = max(1, n // 10)
    first = statistics.median(values[:k])
    if first > 0:
        out["drift"] = statistics.median(values[-k:]) / first - 1
    return out


def steady(s: dict[str, Any], cv_bar: float = STABLE_CV) -> bool:
    """Whether a summary meets the bars: its CV (within `cv_bar`), its worst 1% and its drift."""
    return (s["cv"] is not None and s["cv"] <= cv_bar
            and s["worst_1pct_ratio"] is not None and s["worst_1pct_ratio"] >= STABLE_WORST
            and s["drift"] is not None and abs(s["drift"]) <= STABLE_DRIFT)
